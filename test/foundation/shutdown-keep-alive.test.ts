import http from 'node:http';
import net from 'node:net';
import { describe, expect, it } from '@jest/globals';
import { sql } from '../support/database.js';
import { adminMerchant, baseEnv, callApi, databaseForProcesses, freePort, startProcess } from '../support/processes.js';

/**
 * A graceful stop while clients (or a load balancer) hold keep-alive connections and keep sending
 * requests on them: the process must not wait for those connections until SHUTDOWN_TIMEOUT_MS and exit 1.
 * Once draining, each response says `Connection: close`, /readyz answers 503, and the process exits 0
 * as soon as the requests under way are answered.
 */

const db = databaseForProcesses();

interface Answer {
  path: string;
  status: number;
  connection: string | undefined;
  body: string;
  sentAt: number;
  receivedAt: number;
}

function get(base: string, agent: http.Agent, path: string): Promise<Answer> {
  const sentAt = Date.now();
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}${path}`, { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ path, status: res.statusCode!, connection: res.headers.connection, body, sentAt, receivedAt: Date.now() }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/** Sends SIGTERM now; the function it returns waits for the exit (at most 15 s) and says how long it took. */
function terminate(proc: { pid: number; exited: Promise<unknown> }): () => Promise<{ code: unknown; elapsedMs: number }> {
  const signalledAt = Date.now();
  process.kill(proc.pid, 'SIGTERM');
  return async () => {
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([proc.exited, new Promise((r) => (timer = setTimeout(() => r('still running after 15 s'), 15_000)))]);
    clearTimeout(timer);
    return { code, elapsedMs: Date.now() - signalledAt };
  };
}

/**
 * A cardpay provider (a simulator in its own process, so a stop of the service cannot end it) that
 * answers after `latencyMs`, an api process calling it, and a merchant with its cardpay credentials.
 */
async function serviceWithSlowProvider(latencyMs: number, shop: string, keyName: string) {
  const providerPort = await freePort();
  const provider = await startProcess('api', { ...baseEnv(db.url, `http://127.0.0.1:${providerPort}`, { SANDBOX_LATENCY_MS: String(latencyMs) }), PORT: String(providerPort) }, { name: `provider-${keyName}` });
  // The simulators keep their switches in the file's database: the "hang" an earlier test left on goes off.
  const switched = await fetch(`${provider.url}/sandbox/cardpay/_control/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"mode":"ok"}' });
  expect(switched.status).toBe(200);
  const proc = await startProcess('api', baseEnv(db.url, 'http://127.0.0.1:9', { SHUTDOWN_TIMEOUT_MS: '20000', CARDPAY_BASE_URL: `${provider.url}/sandbox/cardpay` }));
  const { apiKey } = await adminMerchant(db.url, shop);
  // With the webhook secret given, storing them makes one (slow) provider call, not four.
  const stored = await callApi(proc.url!, 'PUT', '/v1/merchant/credentials', apiKey, { provider: 'cardpay', cardpay: { secret_key: `sk_test_${keyName}_0001`, webhook_secret: `whsec_${keyName}` } });
  expect(stored.status).toBe(200);
  return { provider, proc, apiKey };
}

describe('graceful shutdown with keep-alive clients', () => {
  it('closes busy keep-alive connections after their next response and exits 0 long before SHUTDOWN_TIMEOUT_MS', async () => {
    // ROLE=all: the job drain runs too. Simulator answers are held 5 s: a request under way at SIGTERM.
    const proc = await startProcess('all', baseEnv(db.url, 'http://127.0.0.1:9', { SHUTDOWN_TIMEOUT_MS: '20000', SANDBOX_LATENCY_MS: '5000' }));
    const base = proc.url!;
    const answers: Answer[] = [];
    const ended: string[] = [];
    let stopLoops = false;

    // Six clients, each on one keep-alive connection, sending probes back to back.
    const loops = Array.from({ length: 6 }, async (_, i) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        while (!stopLoops) answers.push(await get(base, agent, i % 2 ? '/readyz' : '/healthz'));
        ended.push('stopped');
      } catch (err) {
        // The listener is closed: a new connection is refused (or an idle one was closed under a request).
        ended.push((err as NodeJS.ErrnoException).code ?? String(err));
      } finally {
        agent.destroy();
      }
    });
    while (answers.length < 60) await new Promise((r) => setTimeout(r, 20));
    expect(answers.every((a) => a.status === 200 && a.connection === 'keep-alive')).toBe(true);

    // One more client whose request is under way when SIGTERM arrives.
    const heldAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const held = get(base, heldAgent, '/sandbox/cardpay/v1/balance');
    // Long enough for the request to be read on a loaded machine (a connection that has sent no whole
    // request for a second is closed by the stop, as it should be), well inside the simulator's 5 s.
    await new Promise((r) => setTimeout(r, 1500));

    const { code, elapsedMs: elapsed } = await terminate(proc)();
    stopLoops = true;
    await Promise.all(loops);
    const first = await held;
    heldAgent.destroy();

    expect(code).toBe(0);
    expect(elapsed).toBeLessThan(10_000);
    // The request under way was answered, not cut, and told its client not to send another on that connection.
    expect(first.status).toBeGreaterThan(0);
    expect(first.connection).toBe('close');
    // Once one client has seen the process draining, every request sent later is answered with Connection: close.
    const firstClose = Math.min(first.receivedAt, ...answers.filter((a) => a.connection === 'close').map((a) => a.receivedAt));
    const later = answers.filter((a) => a.sentAt > firstClose);
    expect(later.filter((a) => a.connection !== 'close')).toEqual([]);
    expect(later.filter((a) => a.path === '/readyz').every((a) => a.status === 503)).toBe(true);
    // A draining /readyz never keeps its connection, even when the stop began while it ran.
    expect(answers.filter((a) => a.body.includes('"draining"')).every((a) => a.connection === 'close')).toBe(true);
    // No client was left on a connection the process kept open.
    expect(ended).toHaveLength(6);
  }, 90_000);

  it('a connection whose answer was under way at SIGTERM is closed after that answer and does not hold the stop to the deadline', async () => {
    const proc = await startProcess('api', baseEnv(db.url, 'http://127.0.0.1:9', { SHUTDOWN_TIMEOUT_MS: '20000', SANDBOX_LATENCY_MS: '2000' }));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // Under way at SIGTERM: answered with Connection: close (decided as its headers go out), so the
      // connection closes after it instead of idling until the keep-alive timeout.
      const answered = get(proc.url!, agent, '/sandbox/cardpay/v1/balance');
      await new Promise((r) => setTimeout(r, 300));
      const exit = terminate(proc);
      const first = await answered;
      expect(first.connection).toBe('close');
      const { code, elapsedMs } = await exit();
      // Exit 0 as soon as that connection went idle: neither the keep-alive timeout (65 s) nor the 20 s deadline (exit 1).
      expect(code).toBe(0);
      expect(elapsedMs).toBeLessThan(10_000);
    } finally {
      agent.destroy();
    }
  }, 60_000);

  it('an answer the simulator is holding back (outage "hang") ends with the process instead of holding the stop to the deadline', async () => {
    const proc = await startProcess('api', baseEnv(db.url, 'http://127.0.0.1:9', { SHUTDOWN_TIMEOUT_MS: '20000' }));
    const switched = await fetch(`${proc.url!}/sandbox/cardpay/_control/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"mode":"hang"}' });
    expect(switched.status).toBe(200);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // A client that waits for the provider's answer for as long as it takes (the simulator holds it 120 s).
      const held = get(proc.url!, agent, '/sandbox/cardpay/v1/balance').then(
        (answer) => `answered ${answer.status}`,
        (err: NodeJS.ErrnoException) => err.code ?? String(err),
      );
      await new Promise((r) => setTimeout(r, 300));
      const { code, elapsedMs } = await terminate(proc)();
      // The provider's process went away with the service: its held answer is cut, and the stop is clean.
      expect(code).toBe(0);
      expect(elapsedMs).toBeLessThan(10_000);
      expect(await held).toBe('ECONNRESET');
    } finally {
      agent.destroy();
    }
  }, 60_000);

  it('a static download its client gave up (the file never ended into the closed socket) does not hold the stop to the deadline', async () => {
    const proc = await startProcess('api', baseEnv(db.url, 'http://127.0.0.1:9', { SHUTDOWN_TIMEOUT_MS: '20000' }));
    const { port } = new URL(proc.url!);
    // As a browser leaving the page mid-load: the request sent, the connection dropped before the file came.
    for (const path of ['/docs/swagger-ui-bundle.js', '/dashboard/index.html']) {
      const socket = net.connect(Number(port), '127.0.0.1');
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      await new Promise<void>((resolve) => socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, () => resolve()));
      socket.destroy();
    }
    await new Promise((r) => setTimeout(r, 300));
    const { code, elapsedMs } = await terminate(proc)();
    expect(code).toBe(0);
    expect(elapsedMs).toBeLessThan(10_000);
  }, 60_000);

  it('a connection opened ahead of need (nothing sent yet), or one in the middle of sending its request, does not hold the stop to the deadline', async () => {
    const proc = await startProcess('api', baseEnv(db.url, 'http://127.0.0.1:9', { SHUTDOWN_TIMEOUT_MS: '20000' }));
    const { port } = new URL(proc.url!);
    const connect = async () => {
      const socket = net.connect(Number(port), '127.0.0.1');
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      return { socket, closedByServer: new Promise<boolean>((resolve) => socket.once('close', () => resolve(true))) };
    };
    // As a browser, a balancer or an HTTP client's pool preconnects: connected, nothing sent.
    const preconnected = await connect();
    // A client that has sent part of its request's headers and stalls (Node counts it busy until headersTimeout).
    const halfway = await connect();
    halfway.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    await new Promise((r) => setTimeout(r, 200));
    try {
      const { code, elapsedMs } = await terminate(proc)();
      expect(code).toBe(0);
      expect(elapsedMs).toBeLessThan(10_000);
      expect(await preconnected.closedByServer).toBe(true);
      expect(await halfway.closedByServer).toBe(true);
    } finally {
      preconnected.socket.destroy();
      halfway.socket.destroy();
    }
  }, 60_000);

  it('a payment request whose client hung up is still carried through: the stop waits for the provider\'s answer and records it before exiting 0', async () => {
    // The provider (a simulator in its own process, so the stop cannot end it) answers after 3 s.
    const { provider, proc, apiKey } = await serviceWithSlowProvider(3000, 'Hung-up Shop', 'hung_up_client');

    const key = `hung-up-${Date.now()}`;
    const sentAt = Date.now();
    // The merchant's client gives up 300 ms in (its own timeout, a crash): the provider call is under way.
    const request = http.request(`${proc.url!}/v1/payments`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey, 'Idempotency-Key': key },
    });
    const cut = new Promise<string>((resolve) => request.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message)));
    request.end(JSON.stringify({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' }));
    await new Promise((r) => setTimeout(r, 300));
    request.destroy();
    expect(await cut).toBe('ECONNRESET');
    await new Promise((r) => setTimeout(r, 200));

    const { code } = await terminate(proc)();
    const exitedAfterMs = Date.now() - sentAt;
    expect(code).toBe(0);
    // The process stayed until the provider had answered (3 s after the request reached it)...
    expect(exitedAfterMs).toBeGreaterThan(3_000);
    // ...and recorded that answer: the payment is settled, the key finished (a retry replays it at once).
    const [payment] = await sql<{ status: string; provider_ref: string | null }>(db.url, 'SELECT status, provider_ref FROM payments WHERE idempotency_key = $1', [key]);
    expect(payment).toMatchObject({ status: 'completed', provider_ref: expect.stringMatching(/^pi_/) });
    expect(await sql(db.url, 'SELECT recovery_point FROM idempotency_keys WHERE key = $1', [key])).toEqual([{ recovery_point: 'finished' }]);
    await provider.stop();
  }, 90_000);

  it('a request under way when the stop begins is answered with Connection: close, so its client does not reuse a connection about to close', async () => {
    // The provider (a simulator in its own process) answers after 2 s: the request is under way at SIGTERM.
    const { provider, proc, apiKey } = await serviceWithSlowProvider(2000, 'Under-way Shop', 'under_way');

    const agent = new http.Agent({ keepAlive: true });
    try {
      const answer = new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
        const request = http.request(`${proc.url!}/v1/payments`, {
          method: 'POST',
          agent,
          headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey, 'Idempotency-Key': `under-way-${Date.now()}` },
        }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection }));
        });
        request.on('error', reject);
        request.end(JSON.stringify({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' }));
      });
      // The request is at the provider (its answer comes 2 s after the call), then the stop begins.
      await new Promise((r) => setTimeout(r, 500));
      const exit = terminate(proc);
      expect(await answer).toEqual({ status: 201, connection: 'close' });
      expect((await exit()).code).toBe(0);
    } finally {
      agent.destroy();
      await provider.stop();
    }
  }, 90_000);
});
