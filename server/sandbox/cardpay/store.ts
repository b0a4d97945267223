import type { Db } from './db.js';
import { newId, nowSec } from './db.js';
import { invalidRequest, noSuch } from './errors.js';
import type { CustomerRow, IntentRow, PaymentMethodRow } from './objects.js';
import { testBankAccount, testCard } from './test-cards.js';

/** Row access for the simulator's tables; every lookup is scoped to the calling key's account. */

const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

export async function findIntent(db: Db, account: string, id: string, lock = false): Promise<IntentRow | null> {
  const [row] = await db.query<IntentRow>(
    `SELECT * FROM sandbox_cardpay_intents WHERE id = ? AND account = ?${lock ? ' FOR UPDATE' : ''}`,
    [id, account],
  );
  return row ?? null;
}

export async function requireIntent(db: Db, account: string, id: string, lock = false, param = 'id'): Promise<IntentRow> {
  const row = await findIntent(db, account, id, lock);
  if (!row) throw noSuch('payment_intent', id, param);
  return row;
}

/**
 * The 3-D Secure page is opened by the cardholder's browser, which has no key: look up by the id and the
 * page's secret (payment-intents.ts authenticationUrl), as the id alone is public. None without a secret.
 */
export async function findIntentForAuthentication(db: Db, id: string, secret: string | undefined): Promise<IntentRow | null> {
  if (!secret) return null;
  const [row] = await db.query<IntentRow>('SELECT * FROM sandbox_cardpay_intents WHERE id = ? AND authentication_secret = ? FOR UPDATE', [id, secret]);
  return row ?? null;
}

/** Inserts a new intent with the commit (see sql.ts: a write is sent with the request's last statement). */
export function insertIntent(db: Db, row: IntentRow): void {
  db.write(
    `INSERT INTO sandbox_cardpay_intents (id, account, amount, currency, status, payment_method, customer, description, return_url,
       off_session, setup_future_usage, automatic_payment_methods, metadata, next_action, last_payment_error, latest_charge, amount_received,
       amount_refunded, client_secret, authentication_secret, cancellation_reason, canceled_at, created)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      row.id, row.account, row.amount, row.currency, row.status, row.payment_method, row.customer, row.description, row.return_url,
      row.off_session, row.setup_future_usage, json(row.automatic_payment_methods), json(row.metadata), json(row.next_action), json(row.last_payment_error),
      row.latest_charge, row.amount_received, row.amount_refunded, row.client_secret, row.authentication_secret, row.cancellation_reason, row.canceled_at, row.created,
    ],
  );
}

/** Writes the fields a confirmation, an authentication or a cancellation changes (with the commit). */
export function saveIntentState(db: Db, row: IntentRow): void {
  db.write(
    `UPDATE sandbox_cardpay_intents SET status = ?, payment_method = ?, next_action = ?::jsonb, last_payment_error = ?::jsonb,
       latest_charge = ?, amount_received = ?, cancellation_reason = ?, canceled_at = ?, updated_at = now()
     WHERE id = ?`,
    [
      row.status, row.payment_method, json(row.next_action), json(row.last_payment_error), row.latest_charge, row.amount_received,
      row.cancellation_reason, row.canceled_at, row.id,
    ],
  );
}

/** Writes every field a confirmation or an update may change (with the commit; one statement, as a row is written once per statement). */
export function saveIntent(db: Db, row: IntentRow): void {
  db.write(
    `UPDATE sandbox_cardpay_intents SET status = ?, payment_method = ?, next_action = ?::jsonb, last_payment_error = ?::jsonb,
       latest_charge = ?, amount_received = ?, cancellation_reason = ?, canceled_at = ?, amount = ?, currency = ?, customer = ?,
       description = ?, return_url = ?, off_session = ?, setup_future_usage = ?, metadata = ?::jsonb, authentication_secret = ?, updated_at = now()
     WHERE id = ?`,
    [
      row.status, row.payment_method, json(row.next_action), json(row.last_payment_error), row.latest_charge, row.amount_received,
      row.cancellation_reason, row.canceled_at, row.amount, row.currency, row.customer, row.description, row.return_url, row.off_session,
      row.setup_future_usage, json(row.metadata), row.authentication_secret, row.id,
    ],
  );
}

export async function findPaymentMethod(db: Db, account: string, id: string, lock = false): Promise<PaymentMethodRow | null> {
  const [row] = await db.query<PaymentMethodRow>(
    `SELECT * FROM sandbox_cardpay_payment_methods WHERE id = ? AND account = ?${lock ? ' FOR UPDATE' : ''}`,
    [id, account],
  );
  return row ?? null;
}

/** A new `pm_…` of this account for a test token, inserted with the commit (`usedWithIntent`: confirmed with that intent in this request). */
export function insertPaymentMethod(db: Db, account: string, token: string, customer: string | null, usedWithIntent: string | null = null): PaymentMethodRow {
  const row: PaymentMethodRow = {
    id: newId('pm'), account, token, customer, detached: false, used_with_intent: usedWithIntent, set_up: false, metadata: {}, created: String(nowSec()),
  };
  db.write('INSERT INTO sandbox_cardpay_payment_methods (id, account, token, customer, used_with_intent, created) VALUES (?, ?, ?, ?, ?, ?)', [
    row.id, row.account, row.token, row.customer, row.used_with_intent, row.created,
  ]);
  return row;
}

/**
 * A test token becomes a new `pm_…` of this account (remembering the token; `usedWithIntent` when the
 * request confirms that intent with it); an id must be this account's.
 */
export async function resolvePaymentMethod(db: Db, account: string, idOrToken: string, param: string, usedWithIntent: string | null = null): Promise<PaymentMethodRow> {
  if (testCard(idOrToken)) return insertPaymentMethod(db, account, idOrToken, null, usedWithIntent);
  const row = await findPaymentMethod(db, account, idOrToken, true);
  if (!row) throw noSuch('PaymentMethod', idOrToken, param);
  // Another type than card (a test bank account attached to a customer): the simulator's intents take cards only.
  if (testBankAccount(row.token)) throw invalidRequest(`The PaymentMethod provided (us_bank_account) is not allowed for this PaymentIntent. Please attach a PaymentMethod of one of the following types: card.`, param);
  return row;
}

export async function findCustomer(db: Db, account: string, id: string): Promise<CustomerRow | null> {
  const [row] = await db.query<CustomerRow>('SELECT * FROM sandbox_cardpay_customers WHERE id = ? AND account = ?', [id, account]);
  return row ?? null;
}

export async function paymentMethodById(db: Db, id: string | null): Promise<PaymentMethodRow | null> {
  if (!id) return null;
  const [row] = await db.query<PaymentMethodRow>('SELECT * FROM sandbox_cardpay_payment_methods WHERE id = ?', [id]);
  return row ?? null;
}

/**
 * Records that `pm` (attached to no Customer) is being confirmed with `intentId`, once (with the commit):
 * from then on it may not be used with another intent, nor attached (payment-intents.ts, payment-methods.ts).
 */
export function markUsedWithIntent(db: Db, pm: PaymentMethodRow, intentId: string): void {
  if (pm.customer || pm.used_with_intent) return;
  db.write('UPDATE sandbox_cardpay_payment_methods SET used_with_intent = ? WHERE id = ? AND used_with_intent IS NULL', [intentId, pm.id]);
  pm.used_with_intent = intentId;
}

/**
 * Saves what a successful payment with setup_future_usage did to its PaymentMethod (charging.ts): set up,
 * and attached to the payment's customer. Sent now, not with the commit: the row may be inserted by a
 * write still held, and a statement cannot insert a row and update it.
 */
export async function saveSetUp(db: Db, pm: PaymentMethodRow): Promise<void> {
  await db.query('UPDATE sandbox_cardpay_payment_methods SET set_up = true, customer = ? WHERE id = ?', [pm.customer, pm.id]);
}
