import { createHmac } from 'node:crypto';
import { postOut } from '../egress.js';
import type { SandboxDeps } from '../module.js';
import { readsOnly } from '../sql.js';
import { nowSec } from './db.js';
import { insertJobs, type NamedWrite } from './jobs.js';
import type { EndpointRow, StripeObject } from './objects.js';
import { SIM_API_VERSION, eventObject } from './objects.js';

export const SEND_EVENT_JOB = 'sandbox.cardpay.send-event';

/** Attempts per (event, endpoint), the first included; then the delivery is dropped, like Stripe's. */
const MAX_ATTEMPTS = 6;
const DELIVERY_TIMEOUT_MS = 10_000;

export interface SendEventJob {
  endpointId: string;
  eventId: string;
  type: string;
  /** The serialised event: the same bytes on every attempt (each attempt is signed afresh). */
  body: string;
  attempt: number;
}

/** An event to emit once the state change that caused it is committed. */
export interface PendingEvent {
  type: string;
  object: StripeObject;
}

/** `t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`: Stripe's scheme, sent as Cardpay-Signature. */
export function signatureHeader(body: string, secret: string, timestamp = nowSec()): string {
  const v1 = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  return `t=${timestamp},v1=${v1}`;
}

/**
 * Stripe sends refund.created / refund.updated / refund.failed for a charge's refunds (a card refund) only
 * in API versions from 2024-10-28.acacia on (docs.stripe.com/changelog/acacia/2024-10-28/refund-webhook-update);
 * an endpoint rendering an older version learns of them from charge.refunded and charge.refund.updated.
 */
export const CHARGE_REFUND_EVENTS_SINCE = '2024-10-28';

/** The first API version whose endpoints get this event (null: every version's). */
const sinceFor = ({ type, object }: PendingEvent): string | null =>
  type.startsWith('refund.') && object.object === 'refund' && object.charge ? CHARGE_REFUND_EVENTS_SINCE : null;

/**
 * The jobs that deliver each event to every endpoint of `account` listening to its type, due
 * `sandboxCallbackDelayMs` later: an INSERT … SELECT over the account's endpoints, committed with the
 * change that caused the events (see jobs.ts). Each event is serialised once, with one id for all its
 * endpoints, and sent as plain parameters (a row of VALUES per event), not re-encoded into one JSON
 * document that PostgreSQL would parse again.
 *
 * Rendered in the endpoint's API version where it matters: an endpoint created with an `api_version`
 * before CHARGE_REFUND_EVENTS_SINCE gets no refund.* event of a card refund, and every event it gets says
 * its version (`api_version`; the objects keep the simulator's current shape). An endpoint without one
 * gets the account's default, here the simulator's own version.
 */
export function eventJobs(deps: SandboxDeps, account: string, events: PendingEvent[], idempotencyKey: string | null): NamedWrite | null {
  if (events.length === 0) return null;
  const rows: string[] = [];
  const values: unknown[] = [];
  events.forEach((pending, i) => {
    const { type, object } = pending;
    const event = eventObject(type, object, idempotencyKey);
    rows.push(i === 0 ? '(?::text, ?::text, ?::text, ?::text, 1)' : `(?, ?, ?, ?, ${i + 1})`);
    values.push(event.id, type, JSON.stringify(event, null, 2), sinceFor(pending));
  });
  const due = new Date(Date.now() + deps.config.sandboxCallbackDelayMs).toISOString();
  return insertJobs('event_jobs', {
    sql: `SELECT ?, 0, ?::timestamptz, 'normal',
                 jsonb_build_object('endpointId', e.id, 'eventId', ev.id, 'type', ev.type, 'attempt', 1, 'body',
                   CASE WHEN e.api_version IS NULL OR e.api_version = ? THEN ev.body
                        ELSE jsonb_set(ev.body::jsonb, '{api_version}', to_jsonb(e.api_version))::text END)
            FROM (VALUES ${rows.join(', ')}) AS ev(id, type, body, since, n)
            JOIN sandbox_cardpay_webhook_endpoints e
              ON e.account = ? AND ('*' = ANY (e.enabled_events) OR ev.type = ANY (e.enabled_events))
             AND (ev.since IS NULL OR left(coalesce(e.api_version, ?), 10) >= ev.since)
           ORDER BY ev.n, e.created, e.id`,
    params: [SEND_EVENT_JOB, due, SIM_API_VERSION, ...values, account, SIM_API_VERSION],
  });
}

/**
 * The job body: POST the signed event; a non-2xx answer (a redirect included: not followed) or no answer
 * (a refused address included) is retried a few times with backoff.
 */
export async function sendEvent(deps: SandboxDeps, job: SendEventJob): Promise<void> {
  const [endpoint] = await readsOnly(deps.pool).query<Pick<EndpointRow, 'url' | 'secret'>>(
    'SELECT url, secret FROM sandbox_cardpay_webhook_endpoints WHERE id = ?',
    [job.endpointId],
  );
  if (!endpoint) return; // deleted since: nothing to deliver to
  const signature = signatureHeader(job.body, endpoint.secret);
  // Through the service's egress: no redirect followed, no private address unless allowed (egress.ts).
  const { status, failure: error } = await postOut(deps, 'cardpay', endpoint.url, {
    headers: {
      'Content-Type': 'application/json; charset=utf-8',
      'User-Agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
      // interface.md names the header Cardpay-Signature; the real provider calls it Stripe-Signature.
      'Cardpay-Signature': signature,
      'Stripe-Signature': signature,
    },
    body: job.body,
    timeoutMs: DELIVERY_TIMEOUT_MS,
  });
  const delivered = status !== null && status >= 200 && status < 300;
  const log = { endpoint: job.endpointId, event: job.eventId, type: job.type, attempt: job.attempt, status, error };
  if (delivered) {
    deps.logger.info(log, 'cardpay simulator delivered event');
    return;
  }
  if (job.attempt >= MAX_ATTEMPTS) {
    deps.logger.warn(log, 'cardpay simulator gave up delivering event');
    return;
  }
  const backoffMs = Math.max(deps.config.sandboxCallbackDelayMs, 100) * 2 ** (job.attempt - 1);
  deps.logger.info({ ...log, retryInMs: backoffMs }, 'cardpay simulator will retry event');
  await deps.agenda.schedule(new Date(Date.now() + backoffMs), SEND_EVENT_JOB, { ...job, attempt: job.attempt + 1 });
}
