import { randomUUID } from 'node:crypto';
import { postOut } from '../egress.js';
import type { SandboxDeps } from '../module.js';
import { dbOf, inTransaction, isoTime, paypalId, simulatorBase, type Db } from './db.js';
import { certUrl, signTransmission, signedMessage, signingKeys } from './signing.js';
import { captureView, money, refundView, type CaptureRow, type RefundRow } from './views.js';

export const SEND_EVENT_JOB = 'sandbox.walletpay.send-event';
export const SETTLE_CAPTURE_JOB = 'sandbox.walletpay.settle-capture';
export const FAIL_REFUND_JOB = 'sandbox.walletpay.fail-refund';

/** Attempts per transmission, the first included; then it is marked failed. PayPal tries 25 times over 3 days. */
export const MAX_ATTEMPTS = 25;
/**
 * The longest wait between two attempts, in units of the callback delay (1 s at the default 1000 ms):
 * waits double from one unit up to this, so the 24 retries span ~68 h — PayPal's 3 days, the last one
 * still inside the 72 h a receiver accepts a transmission time for.
 */
const MAX_RETRY_DELAY_UNITS = 6.5 * 3600;
const DELIVERY_TIMEOUT_MS = 10_000;

/**
 * The wait before the next attempt once `attempts` have failed: one unit (the callback delay, at least
 * 100 ms; 1 s by default) doubled for each failure, at most MAX_RETRY_DELAY_UNITS units.
 */
export function retryDelayMs(attempts: number, callbackDelayMs: number): number {
  return Math.min(2 ** (attempts - 1), MAX_RETRY_DELAY_UNITS) * Math.max(callbackDelayMs, 100);
}

export interface SendEventJob {
  transmissionId: string;
}

export interface SettleCaptureJob {
  captureId: string;
}

export interface FailRefundJob {
  refundId: string;
}

interface TransmissionRow {
  id: string;
  event_id: string;
  webhook_id: string;
  url: string;
  raw_body: string;
  transmission_time: string | null;
  signature: string | null;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
}

/**
 * Inside the transaction that made the change: records the event `{id:'WH-…', event_version,
 * create_time, resource_type, resource_version, event_type, summary, resource, links}` and one
 * transmission (the exact bytes to send) per webhook of `clientId` subscribed to its type. Returns the
 * transmission ids, to schedule once the transaction has committed.
 */
export async function recordEvent(
  db: Db,
  base: string,
  input: { clientId: string; eventType: string; resourceType: string; resource: Record<string, unknown>; summary: string },
): Promise<string[]> {
  const id = `WH-${paypalId(17)}-${paypalId(17)}`;
  const event = {
    id,
    event_version: '1.0',
    create_time: isoTime(),
    resource_type: input.resourceType,
    resource_version: '2.0',
    event_type: input.eventType,
    summary: input.summary,
    resource: input.resource,
    links: [
      { href: `${base}/v1/notifications/webhooks-events/${id}`, rel: 'self', method: 'GET' },
      { href: `${base}/v1/notifications/webhooks-events/${id}/resend`, rel: 'resend', method: 'POST' },
    ],
  };
  const rawBody = JSON.stringify(event);
  await db.query('INSERT INTO sandbox_walletpay_events (id, client_id, event_type, body) VALUES (?, ?, ?, ?::jsonb)', [id, input.clientId, input.eventType, rawBody]);
  const webhooks = await db.query<{ id: string; url: string; event_types: { name: string }[] }>(
    'SELECT id, url, event_types FROM sandbox_walletpay_webhooks WHERE client_id = ? ORDER BY created_at, id',
    [input.clientId],
  );
  const transmissions: string[] = [];
  for (const webhook of webhooks) {
    const names = webhook.event_types.map((t) => t.name);
    if (!names.includes('*') && !names.includes(input.eventType)) continue;
    const transmissionId = randomUUID();
    await db.query('INSERT INTO sandbox_walletpay_transmissions (id, event_id, webhook_id, url, raw_body) VALUES (?, ?, ?, ?, ?)', [
      transmissionId, id, webhook.id, webhook.url, rawBody,
    ]);
    transmissions.push(transmissionId);
  }
  return transmissions;
}

/**
 * The capture event matching a capture's status: COMPLETED, PENDING, or DECLINED — PayPal's event for a
 * capture declined at once is PAYMENT.CAPTURE.DECLINED, and PAYMENT.CAPTURE.DENIED for a pending one
 * denied later (`settled`: the capture was PENDING).
 */
export function captureEvent(base: string, capture: CaptureRow, settled = false) {
  const amount = `${capture.currency} ${(captureView(base, capture).amount as { value: string }).value}`;
  const [eventType, summary] =
    capture.status === 'DECLINED' && settled ? ['PAYMENT.CAPTURE.DENIED', `Payment denied for ${amount}`]
      : capture.status === 'DECLINED' ? ['PAYMENT.CAPTURE.DECLINED', `A payment capture for ${amount} was declined`]
      : capture.status === 'PENDING' ? ['PAYMENT.CAPTURE.PENDING', `Payment pending for ${amount}`]
        : ['PAYMENT.CAPTURE.COMPLETED', `Payment completed for ${amount}`];
  return { clientId: capture.client_id, eventType, resourceType: 'capture', resource: captureView(base, capture, { withOrderId: true }), summary };
}

/** After commit: each transmission is sent by an Agenda job `sandboxCallbackDelayMs` later. */
export async function scheduleTransmissions(deps: SandboxDeps, transmissionIds: string[]): Promise<void> {
  const due = new Date(Date.now() + deps.config.sandboxCallbackDelayMs);
  for (const transmissionId of transmissionIds) {
    await deps.agenda.schedule<SendEventJob>(due, SEND_EVENT_JOB, { transmissionId });
  }
}

/**
 * The job body: signs the transmission on its first attempt (the same headers and bytes on every
 * retry), POSTs it, and retries a non-2xx answer or no answer with backoff (retryDelayMs), up to
 * MAX_ATTEMPTS attempts in all, as PayPal does.
 */
export async function sendTransmission(deps: SandboxDeps, job: SendEventJob): Promise<void> {
  const db = dbOf(deps.em);
  const [row] = await db.query<TransmissionRow>('SELECT * FROM sandbox_walletpay_transmissions WHERE id = ?', [job.transmissionId]);
  if (!row || row.status !== 'pending') return;
  const base = simulatorBase(deps.config.publicBaseUrl);
  const keys = await signingKeys(db);
  let { transmission_time: time, signature } = row;
  if (!time || !signature) {
    time = isoTime();
    signature = signTransmission(keys, signedMessage(row.id, time, row.webhook_id, row.raw_body));
    await db.query('UPDATE sandbox_walletpay_transmissions SET transmission_time = ?, signature = ? WHERE id = ?', [time, signature, row.id]);
  }
  const cert = certUrl(base, keys.certId);
  // Through the service's egress: no redirect followed, no private address unless allowed (egress.ts).
  const { status, failure: error } = await postOut(deps, 'walletpay', row.url, {
    headers: {
      'Content-Type': 'application/json',
      'User-Agent': 'PayPal/AUHD-214.0-58257000',
      // interface.md names the headers Walletpay-*; the real provider sends PAYPAL-* (and no webhook id).
      'Walletpay-Transmission-Id': row.id,
      'Walletpay-Transmission-Time': time,
      'Walletpay-Transmission-Sig': signature,
      'Walletpay-Cert-Url': cert,
      'Walletpay-Auth-Algo': 'SHA256withRSA',
      'Walletpay-Webhook-Id': row.webhook_id,
      'PAYPAL-TRANSMISSION-ID': row.id,
      'PAYPAL-TRANSMISSION-TIME': time,
      'PAYPAL-TRANSMISSION-SIG': signature,
      'PAYPAL-CERT-URL': cert,
      'PAYPAL-AUTH-ALGO': 'SHA256withRSA',
    },
    body: row.raw_body,
    timeoutMs: DELIVERY_TIMEOUT_MS,
  });
  const attempts = row.attempts + 1;
  const delivered = status !== null && status >= 200 && status < 300;
  const final = delivered ? 'delivered' : attempts >= MAX_ATTEMPTS ? 'failed' : 'pending';
  await db.query(
    `UPDATE sandbox_walletpay_transmissions
     SET attempts = ?, status = ?, last_response_status = ?, last_error = ?, delivered_at = CASE WHEN ? THEN now() ELSE NULL END
     WHERE id = ?`,
    [attempts, final, status, error ?? (delivered ? null : `HTTP ${status}`), delivered, row.id],
  );
  if (final === 'pending') {
    // A durable Agenda job, not a timer: a retry hours away survives a restart.
    const delay = retryDelayMs(attempts, deps.config.sandboxCallbackDelayMs);
    await deps.agenda.schedule<SendEventJob>(new Date(Date.now() + delay), SEND_EVENT_JOB, { transmissionId: row.id });
  } else if (final === 'failed') {
    deps.logger.warn({ provider: 'walletpay', transmissionId: row.id, attempts }, 'sandbox webhook transmission gave up');
  }
}

/**
 * The job body for a capture left PENDING (review): it completes and sends PAYMENT.CAPTURE.COMPLETED, or,
 * when the buyer approved with `approve-pending-denied` (the order's funding), it is denied: DECLINED,
 * event PAYMENT.CAPTURE.DENIED.
 */
export async function settleCapture(deps: SandboxDeps, job: SettleCaptureJob): Promise<void> {
  const base = simulatorBase(deps.config.publicBaseUrl);
  const transmissions = await inTransaction(deps.em, async (db) => {
    const [capture] = await db.query<CaptureRow>(
      `UPDATE sandbox_walletpay_captures c
       SET status = CASE WHEN o.funding = 'pending_denied' THEN 'DECLINED' ELSE 'COMPLETED' END, status_reason = NULL, updated_at = now()
       FROM sandbox_walletpay_orders o
       WHERE c.id = ? AND c.status = 'PENDING' AND o.id = c.order_id RETURNING c.*`,
      [job.captureId],
    );
    if (!capture) return [];
    return recordEvent(db, base, captureEvent(base, capture, true));
  });
  await scheduleTransmissions(deps, transmissions);
}

/** Counts `amount` (negative: gives it back) as refunded on the capture, whose status follows. */
export async function addRefunded(db: Db, captureId: string, amount: bigint): Promise<CaptureRow> {
  const [updated] = await db.query<CaptureRow>(
    `UPDATE sandbox_walletpay_captures
     SET refunded_minor = refunded_minor + ?,
         status = CASE WHEN refunded_minor + ? >= amount_minor THEN 'REFUNDED' WHEN refunded_minor + ? > 0 THEN 'PARTIALLY_REFUNDED' ELSE 'COMPLETED' END,
         updated_at = now()
     WHERE id = ? RETURNING *`,
    [amount.toString(), amount.toString(), amount.toString(), captureId],
  );
  return updated!;
}

/** The job body for an eCheck refund left PENDING: it fails, the capture gets its amount back, event PAYMENT.REFUND.FAILED. */
export async function failRefund(deps: SandboxDeps, job: FailRefundJob): Promise<void> {
  const base = simulatorBase(deps.config.publicBaseUrl);
  const transmissions = await inTransaction(deps.em, async (db) => {
    const [pending] = await db.query<RefundRow>('SELECT * FROM sandbox_walletpay_refunds WHERE id = ?', [job.refundId]);
    if (!pending) return [];
    await db.query('SELECT 1 FROM sandbox_walletpay_captures WHERE id = ? FOR UPDATE', [pending.capture_id]);
    const [refund] = await db.query<RefundRow>(
      `UPDATE sandbox_walletpay_refunds SET status = 'FAILED', status_reason = NULL, updated_at = now()
       WHERE id = ? AND status = 'PENDING' RETURNING *`,
      [job.refundId],
    );
    if (!refund) return [];
    const capture = await addRefunded(db, refund.capture_id, -BigInt(refund.amount_minor));
    const value = money(refund.amount_minor, refund.currency);
    return recordEvent(db, base, {
      clientId: refund.client_id,
      eventType: 'PAYMENT.REFUND.FAILED',
      resourceType: 'refund',
      resource: refundView(base, refund, capture),
      summary: `A ${value.currency_code} ${value.value} refund failed`,
    });
  });
  await scheduleTransmissions(deps, transmissions);
}
