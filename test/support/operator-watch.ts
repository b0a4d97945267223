import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from './forwarding-stub.js';
import type { TestService } from './service.js';

/** In front of the mobilemoney simulator: notes the TransactionID of every transaction-status request, then forwards it. */
class StatusQueryWatch extends ForwardingStub {
  readonly transactionIds: string[] = [];

  protected override intercept(req: StubRequest, forward: Forward): Promise<StubAnswer | 'hold' | 'cut'> {
    if (req.url.endsWith('/mpesa/transactionstatus/v1/query')) {
      let body: { TransactionID?: unknown } = {};
      try {
        body = JSON.parse(req.body.toString('utf8')) as { TransactionID?: unknown };
      } catch {
        // Still a request that reached the operator: noted with no id.
      }
      this.transactionIds.push(String(body.TransactionID ?? ''));
    }
    return forward();
  }
}

/**
 * `run`'s result, and the TransactionIDs of the transaction-status requests the operator received while it ran: the
 * service's mobilemoney calls go through a stub in front of the simulator meanwhile (the base URL is read
 * per call), which is what the operator saw whatever the service recorded.
 */
export async function statusQueriesSentDuring<T>(t: TestService, run: () => Promise<T>): Promise<{ result: T; sent: string[] }> {
  const watch = new StatusQueryWatch();
  return { result: await behindOperatorStub(t, watch, run), sent: watch.transactionIds };
}

/**
 * `run`'s result, with the service's mobilemoney calls sent through `stub` in front of the simulator meanwhile
 * (the base URL is read per call): the stub forwards them, or answers some itself as the operator would.
 */
export async function behindOperatorStub<T>(t: TestService, stub: ForwardingStub, run: () => Promise<T>): Promise<T> {
  // Behind another base URL the service does not fetch the built-in simulator's certificate (for the
  // SecurityCredential): it gets it as a file, as a deployment does.
  const certDir = mkdtempSync(path.join(os.tmpdir(), 'mm-watch-'));
  const certPath = path.join(certDir, 'SandboxCertificate.cer');
  writeFileSync(certPath, await (await fetch(`${t.baseUrl}/sandbox/mobilemoney/certificates/SandboxCertificate.cer`)).text());
  const config = t.service.container.config;
  const saved = { baseUrl: config.providerBaseUrls.mobilemoney, certPath: config.mobilemoneySecurityCertPaths.sandbox };
  stub.target = t.baseUrl;
  config.providerBaseUrls.mobilemoney = `${await stub.start()}/sandbox/mobilemoney`;
  config.mobilemoneySecurityCertPaths.sandbox = certPath;
  try {
    return await run();
  } finally {
    config.providerBaseUrls.mobilemoney = saved.baseUrl;
    config.mobilemoneySecurityCertPaths.sandbox = saved.certPath;
    rmSync(certDir, { recursive: true, force: true });
    // A failure to stop the stub must not hide the test's own failure.
    await stub.stop().catch(() => undefined);
  }
}
