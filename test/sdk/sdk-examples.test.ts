import { execFile, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { signTestWebhook } from '../../client/index.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';
import { freePort } from '../../server/net/free-port.js';

const run = promisify(execFile);
const tsx = path.resolve('node_modules/.bin/tsx');
const childEnv = (extra: Record<string, string>) => ({ ...process.env, NODE_OPTIONS: '', ...extra });

let t: TestService;
let receiver: ChildProcess | undefined;

beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => {
  receiver?.kill();
  await t.stop();
});


describe('examples/ run with npx tsx', () => {
  it('create-payment.ts stores credentials, creates a cardpay payment and prints it', async () => {
    const { apiKey } = await t.createMerchant('Example Shop');
    const { stdout } = await run(tsx, ['examples/create-payment.ts'], {
      env: childEnv({ BASE_URL: t.baseUrl, API_KEY: apiKey, CARDPAY_SECRET_KEY: 'sk_test_example_0001' }),
    });
    expect(JSON.parse(stdout)).toMatchObject({ provider: 'cardpay', status: 'completed', amount: '25.00', currency: 'USD' });
  }, 60_000);

  it('webhook-receiver.ts accepts a signed delivery, prints the event and rejects a bad signature', async () => {
    const port = await freePort();
    const secret = 'whsec_ZXhhbXBsZS1yZWNlaXZlci1zZWNyZXQtMzItYnl0ZXM=';
    const child = spawn(tsx, ['examples/webhook-receiver.ts'], { env: childEnv({ WEBHOOK_SECRET: secret, PORT: String(port) }) });
    receiver = child;
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', () => out.includes('listening on') && resolve());
      child.on('exit', (code) => reject(new Error(`receiver exited with ${code}`)));
    });

    // Signed as the service sends a delivery: both signatures (X-Payments-Signature and the Standard Webhooks one that covers the id).
    const signed = signTestWebhook(
      { id: 'evt_1', type: 'payment.completed', data: { payment_id: 'p_1', amount: '25.00', currency: 'USD', provider: 'cardpay', status: 'completed', previous_status: 'pending' } },
      secret,
      { deliveryId: 'dlv_1' },
    );
    const body = signed.body;
    const headers = { 'content-type': 'application/json', ...signed.headers };

    const good = await fetch(`http://127.0.0.1:${port}/webhooks`, { method: 'POST', headers, body });
    expect(good.status).toBe(200);
    const bad = await fetch(`http://127.0.0.1:${port}/webhooks`, { method: 'POST', headers: { ...headers, 'X-Payments-Signature': `sha256=${'0'.repeat(64)}` }, body });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: 'signature_mismatch' });

    // The receiver prints before it answers, but its stdout can reach us after the HTTP answer.
    await eventually(() => out.includes('"dlv_1"'), 10_000, 'the printed event');
    const printed = out.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
    expect(printed).toEqual([{ delivery: 'dlv_1', event: JSON.parse(body) }]);
  }, 60_000);
});
