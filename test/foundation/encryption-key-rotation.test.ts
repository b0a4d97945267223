import { createCipheriv, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { verifyWebhook } from '../../client/index.js';
import { SecretBox } from '../../server/domain/crypto/secret-box.js';
import { createTestDatabase, sql } from '../support/database.js';
import { adminMerchant, baseEnv, callApi, freePort, processLogFiles, runCli, startProcess, stopAllProcesses, type ServiceProcess } from '../support/processes.js';
import { parsePrometheus, total } from '../support/prometheus.js';
import { findSecretsInFiles } from '../support/secret-audit.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

// Rotating ENCRYPTION_KEY (README, Production): every process gets the new key as ENCRYPTION_KEY and
// the old one in DECRYPTION_KEYS; `admin secrets reseal` re-encrypts what is stored; the old key is
// then dropped. Merchants notice nothing: payments go on, webhooks keep their signing secret.
const KEY_A = randomBytes(32).toString('base64');
const KEY_B = randomBytes(32).toString('base64');
const CARDPAY_SECRET = 'sk_test_rotation_0001';
/** The `key` label values of stored_secrets, in the order the assertions list them. */
const KEY_KINDS = ['current', 'decryption', 'unknown'];

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let receiver: WebhookReceiver;
let merchantId: string;
let apiKey: string;
let webhookSecret: string;
let port: number;

async function startApp(keys: Record<string, string>): Promise<ServiceProcess> {
  return startProcess('all', baseEnv(db.url, `http://127.0.0.1:${port}`, { PORT: String(port), ...keys }));
}

const call = (app: ServiceProcess, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => callApi(app.url!, method, path, apiKey, body, headers);

let n = 0;
/** A card payment, and its payment.completed webhook checked with the merchant's signing secret as the SDK checks it. */
async function payAndVerifyWebhook(app: ServiceProcess): Promise<void> {
  const created = await call(app, 'POST', '/v1/payments', { provider: 'cardpay', amount: `${++n}.00`, currency: 'USD', payment_method: 'pm_card_visa' }, { 'Idempotency-Key': `rotation-${Date.now()}-${n}` });
  expect([created.status, created.body.data?.status]).toEqual([201, 'completed']);
  const hook = await eventually(() => receiver.events('payment.completed').find((r) => r.json.data?.payment_id === created.body.data.id), 20_000, 'payment.completed webhook');
  expect(verifyWebhook(hook.body, hook.headers as Record<string, string>, webhookSecret).type).toBe('payment.completed');
}

const stored = () =>
  sql<{ credentials: string; webhook: string }>(db.url, `SELECT c.secrets_enc AS credentials, m.webhook_secret_enc AS webhook FROM merchants m JOIN provider_credentials c ON c.merchant_id = m.id WHERE m.id = $1`, [merchantId]).then((r) => r[0]!);

/** The stored_secrets gauge as a process reports it, once it shows `expected` (its snapshot is cached for 5 s). */
async function storedSecretsGauge(app: ServiceProcess, expected: Record<string, number>): Promise<Record<string, number>> {
  const read = async () => {
    const samples = parsePrometheus(await (await fetch(`${app.url}/metrics`)).text());
    return Object.fromEntries(KEY_KINDS.map((key) => [key, total(samples, 'stored_secrets', { key })] as const).filter(([, n]) => n !== 0));
  };
  let last: Record<string, number> = {};
  return eventually(async () => {
    last = await read();
    return JSON.stringify(last) === JSON.stringify(expected) ? last : null;
  }, 15_000, `stored_secrets ${JSON.stringify(expected)}`).catch(() => last);
}

/** A secret as this service sealed it before keys had ids. */
function sealV1(keyBase64: string, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', Buffer.from(keyBase64, 'base64'), iv);
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join('.');
}

const reseal = (keys: Record<string, string>) => runCli('server/admin/cli.ts', ['secrets', 'reseal'], { DATABASE_URL: db.url, NODE_ENV: 'test', ...keys });

beforeAll(async () => {
  db = await createTestDatabase();
  receiver = await new WebhookReceiver().start();
  port = await freePort();
}, 60_000);

afterAll(async () => {
  await stopAllProcesses();
  await receiver?.stop();
  await db?.drop();
}, 60_000);

describe('rotating ENCRYPTION_KEY', () => {
  it('keeps payments and signed webhooks working through the rotation, reseals every stored secret once, and the old key can then go', async () => {
    let app = await startApp({ ENCRYPTION_KEY: KEY_A });
    ({ merchantId, apiKey } = await adminMerchant(db.url, 'Rotation Shop'));
    const hook = await call(app, 'PUT', '/v1/merchant/webhook', { webhook_url: receiver.url });
    expect(hook.status).toBe(200);
    webhookSecret = hook.body.data.webhook_secret as string;
    expect((await call(app, 'PUT', '/v1/merchant/credentials', { provider: 'cardpay', cardpay: { secret_key: CARDPAY_SECRET } })).status).toBe(200);
    await payAndVerifyWebhook(app);
    await app.stop();
    const underA = await stored();

    // Step 1: the new key seals, the old one still opens.
    app = await startApp({ ENCRYPTION_KEY: KEY_B, DECRYPTION_KEYS: KEY_A });
    await payAndVerifyWebhook(app);
    // The operator sees what is left to reseal.
    expect(await storedSecretsGauge(app, { decryption: 2 })).toEqual({ decryption: 2 });

    // Step 2, while the service runs: reseal. A second run finds nothing left to do.
    const first = await reseal({ ENCRYPTION_KEY: KEY_B, DECRYPTION_KEYS: KEY_A });
    expect([first.code, JSON.parse(first.stdout)]).toEqual([0, { resealed: { provider_credentials: 1, merchant_webhook_secrets: 1 }, already_current: 0, unreadable: [] }]);
    const underB = await stored();
    expect(underB.credentials).not.toBe(underA.credentials);
    expect(underB.webhook).not.toBe(underA.webhook);
    expect(new SecretBox(KEY_B).openJson<{ secret_key: string }>(underB.credentials).secret_key).toBe(CARDPAY_SECRET);
    expect(new SecretBox(KEY_B).open(underB.webhook)).toBe(webhookSecret);
    const again = await reseal({ ENCRYPTION_KEY: KEY_B, DECRYPTION_KEYS: KEY_A });
    expect([again.code, JSON.parse(again.stdout)]).toEqual([0, { resealed: { provider_credentials: 0, merchant_webhook_secrets: 0 }, already_current: 2, unreadable: [] }]);
    await payAndVerifyWebhook(app);
    expect(await storedSecretsGauge(app, { current: 2 })).toEqual({ current: 2 });
    await app.stop();

    // Step 3: the old key is gone from the configuration.
    app = await startApp({ ENCRYPTION_KEY: KEY_B });
    await payAndVerifyWebhook(app);
    await app.stop();

    expect(findSecretsInFiles(processLogFiles(), [CARDPAY_SECRET, webhookSecret, apiKey, KEY_A, KEY_B])).toEqual([]);
  }, 180_000);

  // Goes on from the first test: everything stored is under KEY_B now.
  it('a key that opens nothing stored: reseal lists the rows (not their content), changes nothing and exits 1; the api says so at boot and in stored_secrets, and answers 503 (retry) without leaking, to merchants and provider callbacks alike', async () => {
    const before = await stored();
    const refused = await reseal({ ENCRYPTION_KEY: KEY_A });
    expect(refused.code).toBe(1);
    const report = JSON.parse(refused.stdout) as { unreadable: { table: string; id: string }[] };
    expect(report.unreadable.map((u) => u.table).sort()).toEqual(['merchants', 'provider_credentials']);
    expect(refused.stdout + refused.stderr).not.toContain(CARDPAY_SECRET);
    expect(await stored()).toEqual(before);

    const app = await startApp({ ENCRYPTION_KEY: KEY_A });
    const created = await call(app, 'POST', '/v1/payments', { provider: 'cardpay', amount: '5.00', currency: 'USD', payment_method: 'pm_card_visa' }, { 'Idempotency-Key': `rotation-wrong-key-${Date.now()}` });
    // Not the merchant's doing and not a bug: a rolling deploy's process without the new key, say. Another
    // process may hold it, so the answer is "retry", and nothing reached the provider.
    expect([created.status, created.body.success, created.body.error?.code, created.headers['retry-after']]).toEqual([503, false, 'SERVICE_UNAVAILABLE', '1']);
    expect(created.body.error.message).toMatch(/cannot read the stored provider credentials.*nothing was sent to the provider/);
    expect(JSON.stringify(created.body)).not.toMatch(/sealed|ENCRYPTION_KEY|DECRYPTION_KEYS/);
    // A refund without an Idempotency-Key: refused before anything is written, so the advice to retry is
    // true (a pending refund left behind would be sent by the refund sync, and the retry refund again).
    const [paidBefore] = await sql<{ id: string }>(db.url, `SELECT id FROM payments WHERE merchant_id = $1 AND status = 'completed' LIMIT 1`, [merchantId]);
    const refundsBefore = await sql(db.url, 'SELECT id FROM refunds WHERE payment_id = $1', [paidBefore!.id]);
    const refundRefused = await call(app, 'POST', '/v1/refunds', { payment_id: paidBefore!.id, amount: '0.50' });
    expect([refundRefused.status, refundRefused.body.error?.code]).toEqual([503, 'SERVICE_UNAVAILABLE']);
    expect(await sql(db.url, 'SELECT id FROM refunds WHERE payment_id = $1', [paidBefore!.id])).toEqual(refundsBefore);
    // A provider's callback to the merchant's endpoint cannot be verified without the stored signing
    // secret: 503, so the provider sends it again, rather than a 500 logged as a bug.
    const [paid] = await sql<{ id: string; provider_ref: string }>(db.url, 'SELECT id, provider_ref FROM payments WHERE merchant_id = $1 LIMIT 1', [merchantId]);
    const intent = { id: paid!.provider_ref, object: 'payment_intent', status: 'succeeded', amount: 100, currency: 'usd', metadata: { payment_id: paid!.id } };
    const callback = await fetch(`${app.url}/v1/webhooks/cardpay?merchant=${merchantId}`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}` }, body: JSON.stringify({ id: 'evt_1', object: 'event', type: 'payment_intent.succeeded', data: { object: intent } }),
    });
    expect([callback.status, ((await callback.json()) as { error: { code: string } }).error.code]).toEqual([503, 'SERVICE_UNAVAILABLE']);
    expect(await storedSecretsGauge(app, { unknown: 2 })).toEqual({ unknown: 2 });
    await app.stop();
    // Said at boot, before any merchant's request failed.
    const log = readFileSync(app.logFile, 'utf8');
    expect(log).toContain('stored secrets sealed with a key this process does not have');
    // Each refused request says why in the operator's words, not as an unhandled error (the simulator's own
    // resends of earlier events may add lines for the callback route).
    const refusals = log.split('\n').filter((line) => line.includes('stored secret cannot be opened with ENCRYPTION_KEY or DECRYPTION_KEYS; answered 503')).map((line) => (JSON.parse(line) as { route: string }).route);
    expect([...new Set(refusals)].sort()).toEqual(['/v1/payments', '/v1/refunds', '/v1/webhooks/cardpay']);
    expect(log).not.toContain('unhandled error');
    expect(findSecretsInFiles(processLogFiles(), [CARDPAY_SECRET, webhookSecret, KEY_A, KEY_B])).toEqual([]);
  }, 120_000);

  // Goes on from the first test: everything stored is under KEY_B; the credentials become as an older
  // release sealed them with KEY_A, before keys had ids.
  it('a secret sealed before key ids is counted by the key that opens it: with none, the boot says so and stored_secrets shows it unknown; with the old key in DECRYPTION_KEYS it is left to reseal, so the rotation is not reported finished before it is', async () => {
    const BOOT_LINE = 'stored secrets sealed with a key this process does not have';
    const { credentials } = await stored();
    await sql(db.url, 'UPDATE provider_credentials SET secrets_enc = $1 WHERE merchant_id = $2', [sealV1(KEY_A, new SecretBox(KEY_B).open(credentials)), merchantId]);

    let app = await startApp({ ENCRYPTION_KEY: KEY_B });
    const gauge = await storedSecretsGauge(app, { current: 1, unknown: 1 });
    await app.stop();
    expect({ gauge, bootLine: readFileSync(app.logFile, 'utf8').includes(BOOT_LINE) }).toEqual({ gauge: { current: 1, unknown: 1 }, bootLine: true });

    // README's step 3 ("once stored_secrets{key=\"decryption\"} is 0, remove DECRYPTION_KEYS") waits for the reseal.
    app = await startApp({ ENCRYPTION_KEY: KEY_B, DECRYPTION_KEYS: KEY_A });
    expect(await storedSecretsGauge(app, { current: 1, decryption: 1 })).toEqual({ current: 1, decryption: 1 });
    await payAndVerifyWebhook(app);
    const resealed = await reseal({ ENCRYPTION_KEY: KEY_B, DECRYPTION_KEYS: KEY_A });
    expect([resealed.code, JSON.parse(resealed.stdout)]).toEqual([0, { resealed: { provider_credentials: 1, merchant_webhook_secrets: 0 }, already_current: 1, unreadable: [] }]);
    expect(await storedSecretsGauge(app, { current: 2 })).toEqual({ current: 2 });
    await app.stop();
    expect(readFileSync(app.logFile, 'utf8')).not.toContain(BOOT_LINE);
  }, 120_000);
});

describe('SecretBox', () => {
  it('opens secrets sealed before key ids with whichever configured key sealed them, and reseals them under ENCRYPTION_KEY', () => {
    const old = sealV1(KEY_A, 'whsec_old');
    const box = new SecretBox(KEY_B, [KEY_A]);
    expect(box.open(old)).toBe('whsec_old');
    expect(box.sealedWithCurrentKey(old)).toBe(false);
    // Also when ENCRYPTION_KEY itself opens it: a reseal rewrites every v1 secret as v2, naming its key.
    expect(new SecretBox(KEY_A).sealedWithCurrentKey(old)).toBe(false);
    // Counted by the key that opens it, as a secret that names its key is.
    expect([box.keyOf(old), new SecretBox(KEY_A, [KEY_B]).keyOf(old), new SecretBox(KEY_B).keyOf(old)]).toEqual(['decryption', 'current', 'unknown']);
    const resealed = box.seal(box.open(old));
    expect(box.sealedWithCurrentKey(resealed)).toBe(true);
    expect(new SecretBox(KEY_B).open(resealed)).toBe('whsec_old');
    expect(() => new SecretBox(KEY_B).open(old)).toThrow('cannot be opened with ENCRYPTION_KEY or any of DECRYPTION_KEYS');
    expect(() => new SecretBox(KEY_A).open(resealed)).toThrow(/sealed with key \S+ cannot be opened/);
  });

  it('refuses a sealed secret whose authentication tag was cut short', () => {
    const box = new SecretBox(KEY_A);
    const parts = box.seal('whsec_tag').split('.');
    parts[3] = Buffer.from(parts[3]!, 'base64url').subarray(0, 4).toString('base64url');
    expect(() => box.open(parts.join('.'))).toThrow();
  });

  it('refuses a key that is not 32 bytes of base64, naming the variable', () => {
    expect(() => new SecretBox(KEY_A, ['c2hvcnQ='])).toThrow('each of DECRYPTION_KEYS must be the base64 encoding of exactly 32 bytes');
    expect(() => new SecretBox('c2hvcnQ=')).toThrow('ENCRYPTION_KEY must be the base64 encoding of exactly 32 bytes');
  });
});
