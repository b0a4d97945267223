import type { Db } from './db.js';
import { invalidRequest } from './errors.js';
import type { IntentRow, RefundRow, StripeObject } from './objects.js';
import { chargeObject, customerObject, intentObject, paymentMethodObject, refundObject } from './objects.js';
import type { Params } from './params.js';
import { stringArray } from './params.js';
import { findCustomer, findIntent, findPaymentMethod, paymentMethodById } from './store.js';

/** Stripe's limit on how deep an `expand[]` path may go. */
const MAX_DEPTH = 4;

type Loader = (db: Db, account: string, id: string) => Promise<StripeObject | null>;

async function chargeById(db: Db, account: string, id: string): Promise<StripeObject | null> {
  const [intent] = await db.query<IntentRow>('SELECT * FROM sandbox_cardpay_intents WHERE latest_charge = ? AND account = ?', [id, account]);
  return intent ? chargeObject(intent, await paymentMethodById(db, intent.payment_method)) : null;
}

const load: Record<'charge' | 'payment_intent' | 'payment_method' | 'customer', Loader> = {
  charge: chargeById,
  payment_intent: async (db, account, id) => {
    const row = await findIntent(db, account, id);
    return row ? intentObject(row) : null;
  },
  payment_method: async (db, account, id) => {
    const row = await findPaymentMethod(db, account, id);
    return row ? paymentMethodObject(row) : null;
  },
  customer: async (db, account, id) => {
    const row = await findCustomer(db, account, id);
    return row ? customerObject(row) : null;
  },
};

/** Which id-valued field of which object type expands to which object (Stripe's `Expandable<…>` fields the simulator has). */
const EXPANDABLE: Record<string, Record<string, keyof typeof load>> = {
  payment_intent: { latest_charge: 'charge', payment_method: 'payment_method', customer: 'customer' },
  charge: { payment_intent: 'payment_intent', customer: 'customer' },
  refund: { charge: 'charge', payment_intent: 'payment_intent' },
  payment_method: { customer: 'customer' },
};

/** `charge.refunds` is no longer part of a charge (API 2022-11-15) but can still be expanded into its list. */
async function chargeRefunds(db: Db, charge: StripeObject): Promise<StripeObject> {
  const rows = await db.query<RefundRow>('SELECT * FROM sandbox_cardpay_refunds WHERE charge = ? ORDER BY seq DESC', [charge.id]);
  return { id: `${charge.id}_refunds`, object: 'list', data: rows.map(refundObject), has_more: false, url: `/v1/charges/${charge.id}/refunds` };
}

const cannotExpand = (path: string) => invalidRequest(`This property cannot be expanded (${path}).`, 'expand');

async function expandPath(db: Db, account: string, value: unknown, segments: string[], full: string): Promise<unknown> {
  if (segments.length === 0 || value === null || value === undefined) return value;
  const object = value as StripeObject;
  const [field, ...rest] = segments as [string, ...string[]];
  if (object.object === 'list' || object.object === 'search_result') {
    if (field !== 'data') throw cannotExpand(full);
    const data = object.data as unknown[];
    return { ...object, data: await Promise.all(data.map((item) => expandPath(db, account, item, rest, full))) };
  }
  if (object.object === 'charge' && field === 'refunds') {
    const list = typeof object.refunds === 'object' && object.refunds !== null ? (object.refunds as StripeObject) : await chargeRefunds(db, object);
    return { ...object, refunds: await expandPath(db, account, list, rest, full) };
  }
  const kind = EXPANDABLE[object.object]?.[field];
  if (!kind) throw cannotExpand(full);
  const current = object[field];
  const expanded = typeof current === 'string' ? await load[kind](db, account, current) : current;
  return { ...object, [field]: await expandPath(db, account, expanded ?? current, rest, full) };
}

/**
 * Honours `expand[]=latest_charge`, `expand[]=data.latest_charge`, `expand[]=latest_charge.payment_method`…:
 * each named id becomes the object it names, as at Stripe. An unknown path is refused.
 */
export async function expandResponse(db: Db, account: string, body: unknown, params: Params): Promise<unknown> {
  const paths = stringArray(params, 'expand') ?? [];
  let out = body;
  for (const path of paths) {
    const segments = path.split('.');
    if (segments.length > MAX_DEPTH) throw invalidRequest(`You cannot expand more than ${MAX_DEPTH} levels of a property (${path}).`, 'expand');
    out = await expandPath(db, account, out, segments, path);
  }
  return out;
}

