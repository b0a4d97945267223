import { createHash, randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import type { CardpayCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import { cardpayReturnPageUrl } from '../../lib/return-page.js';
import { callbackUrl, providerBaseUrl } from '../base-url.js';
import type {
  CreatePaymentInput,
  PaymentLookup,
  PreparedCredentials,
  ProviderPaymentResult,
  ProviderRefundRecord,
  ProviderRefundResult,
  RefundInput,
  RefundLookup,
  SavedCardDetails,
  VaultPaymentMethod,
} from '../../domain/ports.js';
import { PROVIDER_ACCOUNT_FIELD, ProviderError, answerAboutSomethingElse, providerAccountOf } from '../../domain/ports.js';
import { accountWithMode } from './account.js';
import { CARDPAY_API_VERSION, CardpayClients } from './client.js';
import { toProviderError } from './errors.js';
import { WEBHOOK_EVENT_TYPES, createIntentParams, toPaymentResult, toRefundRecord, toRefundResult, toSavedCard, toWireAmount } from './transformers.js';

/** The metadata key naming, on a customer made for a saved card, that card's id: a resumed save finds what an earlier attempt made by it. */
const SAVED_CARD_METADATA = 'saved_card_id';

/**
 * cardpay over Stripe's PaymentIntents API with the official SDK, pointed at providerBaseUrl (the
 * simulator in the sandbox). Stateless apart from cached SDK clients; every mutating call carries the
 * caller's idempotency key, so a retry can never charge twice.
 */
export class CardpayAdapter {
  private readonly clients = new CardpayClients();

  constructor(private readonly config: AppConfig) {}

  private stripe(creds: CardpayCredentials): Stripe {
    // Read per call: the public address (hence the simulator's) is only known once the server listens.
    return this.clients.for(providerBaseUrl(this.config, 'cardpay'), creds.secret_key, this.config.providerTimeoutMs);
  }

  private async call<T>(op: 'read' | 'write', fn: () => Promise<T>): Promise<T> {
    try {
      return await startWithoutCallSiteStack(fn);
    } catch (err) {
      throw toProviderError(err, op);
    }
  }

  async createPayment(creds: CardpayCredentials, input: CreatePaymentInput): Promise<ProviderPaymentResult> {
    const params = createIntentParams(input, cardpayReturnPageUrl(this.config.publicBaseUrl));
    const intent = await this.call('write', () => this.stripe(creds).paymentIntents.create(params, { idempotencyKey: input.idempotencyKey }));
    return toPaymentResult(intent);
  }

  /**
   * Cancels an intent we recorded failed (a declined intent stays confirmable in requires_payment_method).
   * An intent that cannot be cancelled (already canceled, succeeded after all, or still `processing`:
   * Stripe cancels one only in rare cases) is answered as it is: Stripe refuses the cancel with
   * payment_intent_unexpected_state, and the intent is read (a processing one is `pending`). An answer (the
   * cancel's, or the read's) about another intent is returned as it is: ProviderGateway.abandon, the only
   * caller, takes it for none about ours (answerAboutSomethingElse, `unavailable`: the cancel is tried again
   * later), never for our intent's state — a `succeeded` one would be recorded as a charge of the failed
   * payment (charged_but_failed).
   */
  async abandonPayment(creds: CardpayCredentials, input: { providerRef: string; idempotencyKey: string }): Promise<ProviderPaymentResult> {
    const stripe = this.stripe(creds);
    let intent: Stripe.PaymentIntent;
    try {
      intent = await this.call('write', () => stripe.paymentIntents.cancel(input.providerRef, { cancellation_reason: 'abandoned' }, { idempotencyKey: input.idempotencyKey }));
    } catch (err) {
      if (!(err instanceof ProviderError) || err.providerCode !== 'payment_intent_unexpected_state') throw err;
      intent = await this.call('read', () => stripe.paymentIntents.retrieve(input.providerRef));
    }
    const result = toPaymentResult(intent);
    // Cancelled as ours are (abandoned), with no failed attempt before it (a canceled intent keeps its last_payment_error).
    return intent.status === 'canceled' && intent.cancellation_reason === 'abandoned' && !intent.last_payment_error ? { ...result, endedByOurCancel: true } : result;
  }

  /**
   * Status sync: the intent by id; without one (creation timed out), the intent whose metadata names the
   * payment. An answer about another intent is not one about ours, and is not applied (answerAboutSomethingElse).
   */
  async getPayment(creds: CardpayCredentials, lookup: PaymentLookup): Promise<ProviderPaymentResult> {
    if (lookup.providerRef) {
      const stripe = this.stripe(creds);
      const intent = await this.call('read', () => stripe.paymentIntents.retrieve(lookup.providerRef!));
      if (intent.id !== lookup.providerRef) throw answerAboutSomethingElse('cardpay', 'unavailable', `the intent read as ${lookup.providerRef} is ${String(intent.id)}`);
      return toPaymentResult(intent);
    }
    const found = await this.findPayment(creds, lookup);
    if (!found) throw new ProviderError('cardpay', 'invalid_request', 'cardpay has no payment intent for this payment', 'resource_missing');
    return found;
  }

  /**
   * The intent whose metadata names our payment (every create sends metadata.payment_id), or null. The
   * search index trails writes (under a minute, up to an hour during an incident: docs.stripe.com/search),
   * so "none" from a fresh create proves little; a day later it is the provider's record. A found intent
   * whose metadata names another payment (or none) is no answer about ours: answerAboutSomethingElse, never taken
   * as this payment's intent (its status and amount applied to it), nor as "none".
   */
  async findPayment(creds: CardpayCredentials, lookup: PaymentLookup): Promise<ProviderPaymentResult | null> {
    const found = await this.call('read', () =>
      this.stripe(creds).paymentIntents.search({ query: `metadata['payment_id']:'${lookup.paymentId.replace(/'/g, '')}'`, limit: 1 }),
    );
    const intent = found.data[0];
    if (!intent) return null;
    const named = intent.metadata?.payment_id;
    if (named !== lookup.paymentId) throw answerAboutSomethingElse('cardpay', 'unavailable', `the intent found for payment ${lookup.paymentId} (${String(intent.id)}) names ${named ? `payment ${named}` : 'no payment'}`);
    return toPaymentResult(intent);
  }

  /**
   * Refunds (part of) the intent's charge. Stripe's answer is the refund made, with the metadata we sent
   * and the intent refunded: an answer whose metadata names another refund of ours (or none), or whose
   * intent is another, is about something else (a cache or proxy mixing answers up) and is not applied —
   * ours may have been made, so its outcome is unknown (indeterminate): the refund stays pending and the
   * refund sync finds it by its metadata (findRefund).
   */
  async refundPayment(creds: CardpayCredentials, input: RefundInput): Promise<ProviderRefundResult> {
    const intentId = input.payment.providerRef;
    if (!intentId) throw new ProviderError('cardpay', 'invalid_request', 'the payment has no cardpay payment intent to refund');
    const params: Stripe.RefundCreateParams = {
      payment_intent: intentId,
      metadata: { refund_id: input.refundId, payment_id: input.payment.paymentId },
      amount: toWireAmount(input.amount),
    };
    const refund = await this.call('write', () => this.stripe(creds).refunds.create(params, { idempotencyKey: input.idempotencyKey }));
    const named = refund.metadata?.refund_id;
    const refunded = typeof refund.payment_intent === 'string' ? refund.payment_intent : (refund.payment_intent?.id ?? null);
    if (named !== input.refundId || refunded !== intentId) {
      throw answerAboutSomethingElse('cardpay', 'indeterminate',
        `the refund ${input.refundId} of intent ${intentId} answered refund ${String(refund.id)} of ${refunded ? `intent ${refunded}` : 'no intent'}, naming ${named ? `refund ${named}` : 'no refund'}`);
    }
    return toRefundResult(refund);
  }

  /** Refund sync: the refund by id; without one (the request's answer was lost), the intent's refund whose metadata names ours, if any. */
  async findRefund(creds: CardpayCredentials, lookup: RefundLookup): Promise<ProviderRefundResult | null> {
    const stripe = this.stripe(creds);
    if (lookup.providerRef) {
      const refund = await this.call('read', () => stripe.refunds.retrieve(lookup.providerRef!));
      // As getPayment: an answer about another refund is none about ours.
      if (refund.id !== lookup.providerRef) throw answerAboutSomethingElse('cardpay', 'unavailable', `the refund read as ${lookup.providerRef} is ${String(refund.id)}`);
      return toRefundResult(refund);
    }
    if (!lookup.payment.providerRef) return null;
    const refunds = await this.call('read', () =>
      stripe.refunds.list({ payment_intent: lookup.payment.providerRef!, limit: 100 }).autoPagingToArray({ limit: CardpayAdapter.MAX_CHARGE_REFUNDS }),
    );
    const ours = refunds.find((r) => r.metadata?.refund_id === lookup.refundId);
    return ours ? toRefundResult(ours) : null;
  }

  /** At most this many refunds of one charge are read (a charge cannot have more than its amount in refunds anyway). */
  private static readonly MAX_CHARGE_REFUNDS = 1000;

  async listChargeRefunds(creds: CardpayCredentials, chargeId: string): Promise<ProviderRefundRecord[]> {
    const refunds = await this.call('read', () =>
      this.stripe(creds).refunds.list({ charge: chargeId, limit: 100 }).autoPagingToArray({ limit: CardpayAdapter.MAX_CHARGE_REFUNDS }),
    );
    return refunds.map(toRefundRecord);
  }

  /** The payment method with its customer expanded (the saved card that customer was made for is in its metadata). */
  async paymentMethod(creds: CardpayCredentials, paymentMethodId: string): Promise<VaultPaymentMethod> {
    const method = await this.call('read', () => this.stripe(creds).paymentMethods.retrieve(paymentMethodId, { expand: ['customer'] }));
    const customer = method.customer;
    const customerId = typeof customer === 'string' ? customer : (customer?.id ?? null);
    const named = customer && typeof customer !== 'string' && !customer.deleted ? customer.metadata?.[SAVED_CARD_METADATA] : undefined;
    return {
      type: method.type,
      card: method.type === 'card' && method.card ? toSavedCard(method) : null,
      customer: customerId ? { id: customerId, savedCardId: typeof named === 'string' && named !== '' ? named : null } : null,
    };
  }

  async createCustomer(creds: CardpayCredentials, input: { email?: string; name?: string; savedCardId: string; idempotencyKey: string }): Promise<{ customerId: string }> {
    const params: Stripe.CustomerCreateParams = {
      ...(input.email ? { email: input.email } : {}),
      ...(input.name ? { name: input.name } : {}),
      metadata: { [SAVED_CARD_METADATA]: input.savedCardId },
    };
    const customer = await this.call('write', () => this.stripe(creds).customers.create(params, { idempotencyKey: input.idempotencyKey }));
    return { customerId: customer.id };
  }

  /** Attaching a token yields a new payment-method id: that id, not the token, is what gets charged later. */
  async attachPaymentMethod(
    creds: CardpayCredentials,
    input: { paymentMethodId: string; customerId: string; idempotencyKey: string },
  ): Promise<SavedCardDetails> {
    const stripe = this.stripe(creds);
    const attached = await this.call('write', () =>
      stripe.paymentMethods.attach(input.paymentMethodId, { customer: input.customerId }, { idempotencyKey: input.idempotencyKey }),
    );
    const method = attached.card ? attached : await this.call('read', () => stripe.paymentMethods.retrieve(attached.id));
    return toSavedCard(method);
  }

  /** By search (`metadata['saved_card_id']`), whose index trails writes by up to a minute (docs.stripe.com/search). */
  async customersOfSavedCard(creds: CardpayCredentials, savedCardId: string): Promise<string[]> {
    const query = `metadata['${SAVED_CARD_METADATA}']:'${savedCardId.replace(/'/g, '')}'`;
    const found = await this.call('read', () => this.stripe(creds).customers.search({ query, limit: 10 }));
    return found.data.filter((c) => c.metadata?.[SAVED_CARD_METADATA] === savedCardId).map((c) => c.id);
  }

  async cardsOf(creds: CardpayCredentials, customerId: string): Promise<SavedCardDetails[]> {
    const methods = await this.call('read', () => this.stripe(creds).customers.listPaymentMethods(customerId, { type: 'card', limit: 10 }));
    return methods.data.filter((m) => m.type === 'card' && m.card).map(toSavedCard);
  }

  async deleteCustomer(creds: CardpayCredentials, customerId: string): Promise<void> {
    try {
      await this.call('write', () => this.stripe(creds).customers.del(customerId));
    } catch (err) {
      if (err instanceof ProviderError && err.providerCode === 'resource_missing') return;
      throw err;
    }
  }

  /**
   * The account the key acts on (`GET /v1/account`) and its mode: idempotency keys and every object are that
   * account's, and a test-mode key of an account sees none of its live objects (docs.stripe.com/keys), so
   * `acct_…` alone does not say where a payment can be found: `acct_…:live` or `acct_…:test`.
   */
  async accountId(creds: CardpayCredentials): Promise<string> {
    const account = await this.call('read', () => this.stripe(creds).accounts.retrieveCurrent());
    return accountWithMode(account.id, /^(sk|rk)_live_/.test(creds.secret_key));
  }

  /**
   * Detaching a card that is no longer attached counts as done ('detached'). A payment method the account
   * does not have (404 resource_missing: deleted, or detached and gone — or another account's) is 'missing':
   * proof of a detach only when these credentials are of the account the card was saved under, which the
   * caller judges (CardDetachService: otherwise the detach is given up on and logged for an operator).
   */
  async detachPaymentMethod(creds: CardpayCredentials, paymentMethodId: string): Promise<'detached' | 'missing'> {
    try {
      await this.stripe(creds).paymentMethods.detach(paymentMethodId);
      return 'detached';
    } catch (err) {
      if (err instanceof Stripe.errors.StripeInvalidRequestError && err.statusCode === 400 && /not attached/i.test(err.message)) return 'detached';
      if (err instanceof Stripe.errors.StripeInvalidRequestError && err.statusCode === 404 && err.code === 'resource_missing') return 'missing';
      throw toProviderError(err, 'write');
    }
  }

  /**
   * Subscribes `url` to the events the service uses and returns the new endpoint's id and signing secret.
   * Nothing is removed here (see removeOtherWebhookEndpoints): until the new secret is stored, the
   * endpoint it replaces must keep delivering. `idempotencyKey`: a repeat after a lost answer gets the
   * same endpoint (and secret) back instead of a second one. The endpoint is then read: a replayed
   * answer can name an endpoint deleted since, which would leave the merchant without events.
   */
  async createWebhookEndpoint(creds: CardpayCredentials, url: string, idempotencyKey: string): Promise<{ id: string; secret: string }> {
    const stripe = this.stripe(creds);
    // Events rendered in the version this adapter reads, not in the account's default (which the account
    // holder may change, or which may be older than the one the adapter was written against).
    const params: Stripe.WebhookEndpointCreateParams = { url, enabled_events: WEBHOOK_EVENT_TYPES, metadata: REGISTERED_HERE, api_version: CARDPAY_API_VERSION };
    let endpoint: Stripe.WebhookEndpoint;
    try {
      endpoint = await this.call('write', () => stripe.webhookEndpoints.create(params, { idempotencyKey }));
    } catch (err) {
      // Stripe keeps the answer of a request that started — a 500 too — and replays it for the key's
      // 24 h: every repeat of this PUT would be that error. One new request, then: an endpoint the first
      // may have made is at the same URL, and is deleted once the new secret is stored (afterStored).
      // Not while another request with the key is still running (a concurrent PUT of the same credentials).
      if (!(err instanceof ProviderError) || err.providerCode === 'idempotency_key_in_use') throw err;
      endpoint = await this.call('write', () => stripe.webhookEndpoints.create(params, { idempotencyKey: `${idempotencyKey}-${randomUUID()}` }));
    }
    if (!(await this.webhookEndpointExists(stripe, endpoint.id))) {
      endpoint = await this.call('write', () => stripe.webhookEndpoints.create(params, { idempotencyKey: `${idempotencyKey}-${randomUUID()}` }));
    }
    if (!endpoint.secret) throw new ProviderError('cardpay', 'invalid_request', 'cardpay did not return a webhook signing secret');
    return { id: endpoint.id, secret: endpoint.secret };
  }

  private async webhookEndpointExists(stripe: Stripe, id: string): Promise<boolean> {
    try {
      await this.call('read', () => stripe.webhookEndpoints.retrieve(id));
      return true;
    } catch (err) {
      if (err instanceof ProviderError && err.providerCode === 'resource_missing') return false;
      throw err;
    }
  }

  /**
   * Deletes the account's endpoints at `url` but those `keep` names (this merchant's earlier ones: their
   * secrets cannot be read back, and their deliveries would fail verification). Every one is tried; an
   * endpoint already gone counts as deleted. Answers the ids that could not be deleted, with why.
   * `listed`: the account's endpoints at `url` as webhookEndpointsAt just answered them (the caller read
   * them to decide `keep`), not listed again.
   */
  async removeOtherWebhookEndpoints(
    creds: CardpayCredentials,
    url: string,
    keep: (endpoint: WebhookEndpointAt) => boolean,
    listed?: WebhookEndpointAt[],
  ): Promise<{ id: string; error: string }[]> {
    const stripe = this.stripe(creds);
    const failed: { id: string; error: string }[] = [];
    for (const endpoint of (listed ?? (await this.webhookEndpointsAt(creds, url))).filter((e) => !keep(e))) {
      try {
        await this.call('write', () => stripe.webhookEndpoints.del(endpoint.id));
      } catch (err) {
        if (err instanceof ProviderError && err.providerCode === 'resource_missing') continue;
        failed.push({ id: endpoint.id, error: (err as Error).message });
      }
    }
    return failed;
  }

  /** The account's endpoints at `url`, and whether the service registered each (REGISTERED_HERE). */
  async webhookEndpointsAt(creds: CardpayCredentials, url: string): Promise<WebhookEndpointAt[]> {
    const stripe = this.stripe(creds);
    const existing = await this.call('read', () => stripe.webhookEndpoints.list({ limit: 100 }));
    return existing.data
      .filter((e) => e.url === url)
      .map((e) => ({ id: e.id, registeredHere: Object.entries(REGISTERED_HERE).every(([k, v]) => e.metadata?.[k] === v) }));
  }
}

/** A webhook endpoint at the merchant's URL. */
export interface WebhookEndpointAt {
  id: string;
  /** Registered by the service (not made in the provider's dashboard). */
  registeredHere: boolean;
}

/**
 * The metadata on every endpoint the service registers. A merchant's own endpoint (made in the
 * dashboard, its secret stored as webhook_secret) may be at the same URL: when such a secret replaces
 * credentials, only the endpoints the service registered there are deleted, never the merchant's.
 * Endpoints registered before the tag was added have none, and count as the merchant's.
 */
const REGISTERED_HERE = { registered_by: 'multi-provider-payments' } as const;

/**
 * The credentials preparer for cardpay: credentials stored without a webhook_secret get our callback
 * URL registered with the provider, and keep the signing secret it returns. The merchant's earlier
 * endpoint is deleted only once the new secret is stored (afterStored): were the new endpoint's creation
 * to fail, or its answer be lost, the stored credentials and their endpoint go on working as before.
 * Credentials stored with a webhook_secret (the merchant's own endpoint) replace ones whose endpoint the
 * service registered just the same: that endpoint is deleted once they are stored — with the replaced
 * secret key too when it is another and not known to act on the same account (on another account, the
 * new key cannot see it; a key rolled in the dashboard may have expired already) — unless they name
 * its very secret (the merchant kept the endpoint), or, on the new key's account, no endpoint but those
 * the service registered is at the URL (the secret is then one of theirs, rolled in the dashboard).
 */
export function prepareCardpayCredentials(
  adapter: CardpayAdapter,
  config: AppConfig,
): (merchantId: string, creds: CardpayCredentials, previous?: CardpayCredentials | null) => Promise<PreparedCredentials<CardpayCredentials>> {
  return async (merchantId, given, previous = null) => {
    const creds = await withProviderAccount(adapter, given, previous);
    const url = merchantWebhookUrl(config, merchantId);
    // Where the replaced endpoints are: the new key's account, and the replaced key's if it is another key.
    // Both keys known to act on one account (a key rolled in the dashboard, a restricted key of it): one
    // account to clean, through the replaced key only when the new one could not (a restricted key without
    // the webhook-endpoint permission) — the replaced key may have expired already (401 at every call).
    const oneAccount = previous !== null && providerAccountOf(previous) !== null && providerAccountOf(previous) === providerAccountOf(creds);
    const keys = previous && previous.secret_key !== creds.secret_key ? [creds, previous] : [creds];
    const remove = (keep: (e: WebhookEndpointAt) => boolean, listed?: WebhookEndpointAt[]) => removeWebhookEndpoints(adapter, keys, url, keep, listed, oneAccount);
    if (creds.webhook_secret) {
      if (!previous || previous.webhook_secret === creds.webhook_secret) return { credentials: creds };
      return {
        credentials: creds,
        afterStored: async () => {
          // The endpoint in use is on the new key's account, and it is the one whose secret was given:
          // - one there we did not register (the merchant made it in the dashboard) is most likely it: those
          //   stay, the ones we registered there go;
          // - only ones we registered there: the secret is one of theirs (the merchant rolled its secret in
          //   the dashboard, same endpoint, new secret), and which one cannot be told: all of them stay.
          // On another account none is in use, whoever made it (ids are the provider's, unique across
          // accounts: one seen on the new key's account is never deleted through the replaced key). A new key
          // that may not list endpoints (a restricted key without that permission) leaves, anywhere, those we
          // did not register.
          // That listing is the one the new key's account is cleaned up from (not listed twice).
          const listed = await adapter.webhookEndpointsAt(creds, url).catch(() => undefined);
          let keep = (e: WebhookEndpointAt) => !e.registeredHere;
          if (listed) {
            const theirs = listed.filter((e) => !e.registeredHere);
            const staying = new Set((theirs.length > 0 ? theirs : listed).map((e) => e.id));
            keep = (e) => staying.has(e.id);
          }
          await remove(keep, listed);
        },
      };
    }
    // The same request (same key, URL, events) while the same credentials are stored: a repeat of a PUT
    // whose answer was lost (or that failed after the provider created the endpoint) gets that endpoint
    // back, not a second one. Once its secret is stored, the next registration has another key.
    const idempotencyKey = `webhook-endpoint-${createHash('sha256')
      .update(JSON.stringify([merchantId, url, creds.secret_key, WEBHOOK_EVENT_TYPES, previous?.secret_key ?? null, previous?.webhook_secret ?? null]))
      .digest('hex')
      .slice(0, 40)}`;
    const endpoint = await adapter.createWebhookEndpoint(creds, url, idempotencyKey);
    return {
      credentials: { ...creds, webhook_secret: endpoint.secret },
      afterStored: () => remove((e) => e.id === endpoint.id),
    };
  };
}

/**
 * The credentials with the id of the account their key acts on (PROVIDER_ACCOUNT_FIELD), which every payment
 * made under them records: Stripe's idempotency keys and objects are per account, so a payment is never
 * looked up, created again or judged absent through a key of another account (ProviderGateway). The same
 * key as the stored one keeps its recorded account without asking. An account that cannot be read (the
 * provider unreachable, a key refused, a restricted key without read access to the account) is left
 * unrecorded: payments made under such credentials record none and are not guarded, as before the field.
 */
async function withProviderAccount(adapter: CardpayAdapter, creds: CardpayCredentials, previous: CardpayCredentials | null): Promise<CardpayCredentials> {
  const { [PROVIDER_ACCOUNT_FIELD]: _given, ...given } = creds as CardpayCredentials & Record<string, unknown>;
  const known = previous && previous.secret_key === given.secret_key ? providerAccountOf(previous) : null;
  const account = known ?? (await adapter.accountId(given).catch(() => null));
  return account ? ({ ...given, [PROVIDER_ACCOUNT_FIELD]: account } as CardpayCredentials) : given;
}

/**
 * After a merchant's cardpay credentials were deleted: the merchant's endpoints (at its URL) are deleted
 * at the provider, whoever created them — no credentials here can verify their events any more, and
 * each would be refused (401) and retried for days, on a shared account for every other merchant's
 * payments too, until the provider disables the endpoint.
 */
export function removeCardpayWebhookEndpoints(adapter: CardpayAdapter, config: AppConfig): (merchantId: string, creds: CardpayCredentials) => Promise<void> {
  return (merchantId, creds) => removeWebhookEndpoints(adapter, [creds], merchantWebhookUrl(config, merchantId), () => false);
}

/**
 * The merchant's endpoint URL. One endpoint per merchant, its URL naming the merchant: merchants may
 * share one provider account, whose endpoints all receive every event, and a registration (or a
 * removal) touches only this merchant's endpoint.
 */
function merchantWebhookUrl(config: AppConfig, merchantId: string): string {
  return `${callbackUrl(config, 'cardpay')}?merchant=${encodeURIComponent(merchantId)}`;
}

/**
 * Deletes the endpoints at `url` but those `keep` names, on the account of each of `keys` in turn (a
 * failure with one does not stop the next); throws, naming what is left, if anything could not be.
 * `listedForFirst`: the endpoints at `url` on the first key's account, when the caller already listed them.
 * `oneAccount`: the keys act on one account, so the first key that cleans it up is enough, and only what
 * the last one tried left is reported.
 */
async function removeWebhookEndpoints(
  adapter: CardpayAdapter,
  keys: CardpayCredentials[],
  url: string,
  keep: (endpoint: WebhookEndpointAt) => boolean,
  listedForFirst?: WebhookEndpointAt[],
  oneAccount = false,
): Promise<void> {
  let failed: string[] = [];
  for (const [i, creds] of keys.entries()) {
    const ofThisKey: string[] = [];
    try {
      const listed = i === 0 ? listedForFirst : undefined;
      ofThisKey.push(...(await adapter.removeOtherWebhookEndpoints(creds, url, keep, listed)).map((f) => `${f.id} (${f.error})`));
    } catch (err) {
      ofThisKey.push(`those on the account of ${i === 0 ? 'the secret key' : 'the replaced secret key'} (${(err as Error).message})`);
    }
    if (!oneAccount) failed.push(...ofThisKey);
    else if (ofThisKey.length === 0) return;
    else failed = ofThisKey;
  }
  if (failed.length > 0) {
    throw new Error(`cardpay webhook endpoint(s) ${failed.join(', ')} at ${url} could not be deleted; delete them in the provider's dashboard`);
  }
}

/**
 * Starts an SDK call without the stack trace stripe-node captures and formats at every call (to add the
 * caller's site to its errors): every SDK error becomes a ProviderError here, whose stack is never shown
 * or logged, and the capture cost ~2–3 % of the api process's CPU per payment created (more with source
 * maps on, as under tsx). The SDK takes it synchronously when the call starts, so the limit is restored
 * before anything else runs.
 */
function startWithoutCallSiteStack<T>(fn: () => Promise<T>): Promise<T> {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return fn();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
