import type { EntityManager } from '@mikro-orm/postgresql';
import { PaymentSchema, RefundSchema, type Payment, type Refund } from '../../persistence/entities/index.js';
import type { PaymentReference, RefundReference } from '../ports.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** provider_data keys a provider may name; inlined in SQL so the expression indexes apply. */
const DATA_KEY = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

/** `id` when it has the shape of one of our ids (a uuid), else null: never sent to the database otherwise. */
export const ourId = (id: string | null | undefined): string | null => (id && UUID.test(id) ? id : null);

/**
 * Finds the payment a notification is about, among the provider's payments: our id stamped at the
 * provider first, then the provider's reference (provider_ref, or the provider_data fact it names).
 */
export async function resolvePayment(em: EntityManager, provider: string, ref: PaymentReference): Promise<Payment | null> {
  const id = ourId(ref.ourId);
  if (id) {
    const byId = await em.findOne(PaymentSchema, { id, provider });
    if (byId) return byId;
  }
  if (!ref.providerRef) return null;
  const byRef = await em.findOne(PaymentSchema, { provider, providerRef: ref.providerRef });
  if (byRef || !ref.providerDataKey || !DATA_KEY.test(ref.providerDataKey)) return byRef;
  const rows = await em.getConnection().execute<{ id: string }[]>(
    `SELECT id FROM payments WHERE provider = ? AND provider_data->>'${ref.providerDataKey}' = ? LIMIT 1`,
    [provider, ref.providerRef],
  );
  return rows[0] ? em.findOne(PaymentSchema, { id: rows[0].id }) : null;
}

/**
 * Finds a refund of one of the provider's payments: our id first, then the provider's reference — its
 * current one, or one of its earlier requests' (a reversal sent again: their results still count).
 */
export async function resolveRefund(em: EntityManager, provider: string, ref: RefundReference): Promise<Refund | null> {
  const id = ourId(ref.ourId);
  const refund =
    (id ? await em.findOne(RefundSchema, { id }) : null) ??
    (ref.providerRef ? ((await em.findOne(RefundSchema, { providerRef: ref.providerRef })) ?? (await byEarlierRequest(em, ref.providerRef))) : null);
  if (!refund) return null;
  const payment = await em.findOne(PaymentSchema, { id: refund.paymentId, provider });
  return payment ? refund : null;
}

/** The refund one of whose earlier requests had `providerRef` (refunds_earlier_provider_refs_idx: only refunds sent again). */
async function byEarlierRequest(em: EntityManager, providerRef: string): Promise<Refund | null> {
  const rows = await em.getConnection().execute<{ id: string }[]>(
    `SELECT id FROM refunds WHERE cardinality(earlier_provider_refs) > 0 AND earlier_provider_refs @> ARRAY[?]::text[] LIMIT 1`,
    [providerRef],
  );
  return rows[0] ? em.findOne(RefundSchema, { id: rows[0].id }) : null;
}

export interface StatusQueryRow {
  id: string;
  merchant_id: string;
  payment_id: string | null;
  /** Set on a query that confirms a reversal result: the refund it is about. */
  refund_id: string | null;
  /** What the query confirms (the label of an unverifiable notification), or null for a merchant's check-status. */
  confirms: string | null;
  /** What was asked about: a receipt, a provider reference, or a request's provider id. */
  code: string;
  /** The provider's id for the query (from its acknowledgement); null until that is recorded. */
  provider_query_ref: string | null;
}

/** Finds a status query we sent to the provider: our id (in the result URL) first, then the provider's id for it. */
export async function resolveStatusQuery(em: EntityManager, provider: string, ref: { ourId: string | null; providerRef: string | null }): Promise<StatusQueryRow | null> {
  const id = ourId(ref.ourId);
  if (!id && !ref.providerRef) return null;
  const rows = await em.getConnection().execute<StatusQueryRow[]>(
    `SELECT id, merchant_id, payment_id, refund_id, confirms, code, provider_query_ref FROM provider_status_queries WHERE provider = ? AND ${id ? 'id = ?' : 'provider_query_ref = ?'} LIMIT 1`,
    [provider, id ?? ref.providerRef],
  );
  return rows[0] ?? null;
}

/**
 * One of our refunds of `paymentId` a provider reports on: by the provider's refund id, else by our id.
 * Our id comes from a field the merchant's own calls at the provider can set too (cardpay
 * metadata.refund_id, walletpay custom_id): found by it, the report is about our refund only when the
 * provider refund it describes is our refund's own — its provider_ref or an earlier request's, or, while
 * it has recorded none, one no other refund holds (referenceConflict). Otherwise `notOurs` says why, and
 * the report must not be applied to it.
 */
export async function findOurRefund(
  em: EntityManager, provider: string, paymentId: string, reported: { ourRefundId: string | null; providerRefundId: string },
): Promise<{ refund: Refund; notOurs: string | null } | null> {
  const byRef = await em.findOne(RefundSchema, { paymentId, providerRef: reported.providerRefundId });
  if (byRef) return { refund: byRef, notOurs: null };
  const id = ourId(reported.ourRefundId);
  const byId = id ? await em.findOne(RefundSchema, { id, paymentId }) : null;
  if (!byId) return null;
  return { refund: byId, notOurs: await referenceConflict(em, provider, reported.providerRefundId, { kind: 'refund', refund: byId }) };
}

export type ReferencedSubject =
  | { kind: 'payment'; payment: Payment; providerDataKey?: string }
  | {
      kind: 'refund';
      refund: Refund;
      /** At the address bound to this refund for the results of our reversal requests (a token only we and the provider know). */
      atItsAddress?: boolean;
    }
  | { kind: 'status-query'; query: StatusQueryRow };

/**
 * The subject's id and the provider reference it stored for what `claimed` names (null: none yet), with
 * the references of its earlier requests that are still its own (a refund's reversal sent again), and
 * whether it may have requests whose reference was never recorded (`unrecorded`).
 */
function storedReference(subject: ReferencedSubject): { id: string; stored: string | null; earlier?: readonly string[]; unrecorded?: boolean } {
  switch (subject.kind) {
    case 'payment': {
      // A reference of the kind provider_data[key] holds is compared with that fact alone: provider_ref is
      // another kind there (an order id beside a capture id, a receipt beside a CheckoutRequestID).
      const key = subject.providerDataKey;
      if (!key) return { id: subject.payment.id, stored: subject.payment.providerRef ?? null };
      const fact = subject.payment.providerData[key];
      return { id: subject.payment.id, stored: typeof fact === 'string' && fact ? fact : null };
    }
    case 'refund':
      return {
        id: subject.refund.id,
        stored: subject.refund.providerRef ?? null,
        earlier: subject.refund.earlierProviderRefs ?? [],
        // A reversal sent again: a request whose acknowledgement was lost has a reference never recorded,
        // and its result comes to the refund's own address (the token proves it answers our request for
        // this refund) naming it. A refund sent once has no other request, whatever address.
        unrecorded: subject.refund.reversalResends > 0 && subject.atItsAddress === true,
      };
    case 'status-query':
      return { id: subject.query.id, stored: subject.query.provider_query_ref };
  }
}

/**
 * Whether `claimed` is a reference the subject recorded as its own: the one it stored, or one of a refund's
 * earlier requests'. What a notification whose binding to the subject is not proven may be applied by
 * (NotificationScheme.boundToSubject); referenceConflict lets more through (a reference no one holds yet).
 */
export function recordedAsItsOwn(claimed: string | null, subject: ReferencedSubject): boolean {
  if (!claimed) return false;
  const { stored, earlier = [] } = storedReference(subject);
  return stored === claimed || earlier.includes(claimed);
}

/**
 * The reference a notification carries for what it is about (a CheckoutRequestID, a reversal's or a
 * status query's OriginatorConversationID, an intent, order or capture id), checked against the subject
 * it was resolved to — which may have been found by our id taken from an unsigned part of the request
 * (mobilemoney's `?ref=`), while a signature covers the body only. The reference must be the subject's
 * own: equal to the one it stored (or to one of a refund's earlier requests', a reversal sent again), or,
 * while it has stored none yet (its request's answer not recorded yet, or lost) or may have a request
 * whose reference was never recorded (a reversal sent again, the result at the refund's own address),
 * held by no other subject. Returns why it is not, or null.
 */
export async function referenceConflict(em: EntityManager, provider: string, claimed: string | null, subject: ReferencedSubject): Promise<string | null> {
  if (!claimed) return null;
  const { id, stored, earlier = [], unrecorded = false } = storedReference(subject);
  if (stored !== null && (stored === claimed || earlier.includes(claimed))) return null;
  if (stored !== null && !unrecorded) return `it names ${claimed}; the subject's reference is ${stored}`;
  const byReference = { ourId: null, providerRef: claimed };
  const holder =
    subject.kind === 'payment'
      ? await resolvePayment(em, provider, { ...byReference, providerDataKey: subject.providerDataKey })
      : subject.kind === 'refund'
        ? await resolveRefund(em, provider, byReference)
        : await resolveStatusQuery(em, provider, byReference);
  return holder && holder.id !== id ? `it names ${claimed}, another subject's reference (${holder.id})` : null;
}

/**
 * Whether every provider refund id in `providerRefundIds` is recorded on one of `paymentId`'s refunds (its
 * provider_ref, or an earlier request's): then a notification naming them is about those refunds of ours.
 */
export async function refundsRecordedOn(em: EntityManager, paymentId: string, providerRefundIds: readonly string[]): Promise<boolean> {
  if (providerRefundIds.length === 0 || providerRefundIds.some((id) => !id)) return false;
  const wanted = [...new Set(providerRefundIds)];
  const rows = await em.getConnection().execute<{ n: string | number }[]>(
    `SELECT count(*) AS n FROM unnest(ARRAY[${wanted.map(() => '?').join(', ')}]::text[]) AS w(id)
      WHERE EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = ? AND (r.provider_ref = w.id OR r.earlier_provider_refs @> ARRAY[w.id]))`,
    [...wanted, paymentId],
  );
  return Number(rows[0]?.n ?? 0) === wanted.length;
}
