// The Idempotency-Keys of a payment's capture and refund clicks: which key a click sends, when it is kept
// (the same request again) and when it is dropped (a new request).
import { api, newIdempotencyKey } from './api.js';
import { keyLifetimeMs, lifetimeText, stillRemembered } from './key-lifetime.js';
import { announce } from './nav.js';

/**
 * The Idempotency-Key of a payment's next capture or refund, sent by every click of the same request
 * until the service gives its final answer, also across redraws of the page (a failed capture redraws
 * it). A click after a lost answer is then the same request, which the service never carries out twice.
 * Another body (a refund amount changed) is another request, with a key of its own.
 */
const pendingKeys = new Map();
export const idempotencyKeyFor = (action, paymentId, body = {}) => {
  const name = `${action} ${paymentId}`;
  const request = JSON.stringify(body);
  const pending = pendingKeys.get(name);
  if (pending?.request === request) return pending.key;
  const key = newIdempotencyKey();
  // When it was first sent: the service forgets a key after its lifetime (keptRefundMayBeSent).
  pendingKeys.set(name, { request, key, firstSentAt: Date.now() });
  return key;
};
/**
 * After the service's final answer — a success, or a refusal it would replay to the same key — the next
 * click is a new request (a second partial refund, a reversal asked again once the operator is back):
 * it gets a new key. After no answer, a proxy's error page, "still processing" or an outcome the service
 * could not record (`Payments-Outcome: unknown`) the key is kept; so it
 * is while the refund answered is `pending` (the provider may not have answered: it may be made yet), and
 * the same click again shows that refund as it is now instead of asking for a second one.
 */
export const answered = (action, paymentId, err, data) => {
  const name = `${action} ${paymentId}`;
  if (data?.status === 'pending') {
    const kept = pendingKeys.get(name);
    if (kept) kept.refundId = data.id;
    return;
  }
  if (!err || err.final) pendingKeys.delete(name);
};

/**
 * A key kept for a refund answered `pending` replays that refund only while it is still pending: once it
 * settled (the provider's event, the refund sync), the same click means another refund, with a new key.
 */
export async function forgetSettledRefund(paymentId, body) {
  const kept = pendingKeys.get(`refund ${paymentId}`);
  if (!kept?.refundId || kept.request !== JSON.stringify(body)) return;
  let status;
  try {
    status = (await api('GET', `/v1/refunds/${kept.refundId}`)).data.status;
  } catch {
    // Not readable now (a key without refunds:read, no answer): the key is kept, so the click replays the
    // earlier refund (its answer says how it stands) rather than risk a second one.
    return;
  }
  if (status !== 'pending') pendingKeys.delete(`refund ${paymentId}`);
}

/**
 * A kept refund key is sent again only while the service still remembers it (IDEMPOTENCY_KEY_RETENTION,
 * 24 h by default): past that the same key would be a new request, a second refund. Then — or while the
 * page cannot read that lifetime (config.json unanswered) — the page shows the kept refund as it is and
 * asks before making a new one; declined, nothing is sent. Returns whether the click may go on (with the
 * kept key while remembered, else with a new one).
 */
export async function keptRefundMayBeSent(paymentId, body, currency) {
  const name = `refund ${paymentId}`;
  const kept = pendingKeys.get(name);
  if (!kept || kept.request !== JSON.stringify(body)) return true;
  // Read once: the decision and the words that explain it come from the same answer.
  const lifetimeMs = await keyLifetimeMs();
  if (stillRemembered(kept.firstSentAt, lifetimeMs)) return true;
  const what = body.amount ? `${body.amount} ${currency}` : 'the rest of the payment';
  const sentAt = new Date(kept.firstSentAt).toLocaleString();
  let earlier = `A refund of ${what} was sent at ${sentAt} and its answer was lost: it may have been made.`;
  if (kept.refundId) {
    try {
      const { data } = await api('GET', `/v1/refunds/${kept.refundId}`);
      earlier = `The refund of ${data.amount} ${data.currency} sent at ${sentAt} is ${data.status}${data.status === 'pending' ? ': it may still be made' : ''}.`;
    } catch {
      earlier = `The refund of ${what} sent at ${sentAt} was pending when last seen: it may still be made.`;
    }
  }
  const why = lifetimeMs === null
    ? 'How long the service remembers a request could not be read (/dashboard/config.json did not answer), so it may have forgotten this one: another click may make a second refund.'
    : `It was sent too long ago to be sent again as the same request (the service remembers one for ${lifetimeText(lifetimeMs)}), so another click makes a second refund.`;
  if (!window.confirm(`${earlier} ${why} Make a new refund of ${what}?`)) {
    announce(`No refund sent. ${earlier} See the refunds below.`);
    return false;
  }
  pendingKeys.delete(name);
  return true;
}
