import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { SavedCardSchema, type SavedCard } from '../../persistence/entities/index.js';
import { DomainError, OutcomeUnknownError, afterProviderMayHaveActed, notFound } from '../errors.js';
import type { Logger } from '../../observability/logger.js';
import type { CredentialsService } from '../merchants/credentials.service.js';
import { ProviderError, providerAccountOf, type CardVault, type ProviderPort, type ProviderRegistry, type SavedCardDetails } from '../ports.js';
import { hashRequest, type IdempotencyKeys } from '../payments/idempotency-keys.js';
import { DETACH_DUE_SQL, type CardDetachService } from './card-detach.service.js';
import { waitForCardSends } from '../payments/saved-card-sends.js';

/**
 * A provider failure as the answer: one that does not say whether the provider acted (no answer in time,
 * a dropped connection, its server error: `indeterminate`) is an unknown outcome — the customer may have
 * been created and the card attached — answered 502 with Payments-Outcome: unknown; an Idempotency-Key
 * keeps no answer for it (`resumable` in save), so a retry with the key resumes the save, finds what the
 * provider did (customerWithCard) and finishes it instead of making a second customer or card; in a resumed
 * save every failure is such an unknown outcome. Any other (`unavailable`: never sent; auth, rate limit:
 * refused before acting) is a plain 502.
 */
function providerFailure(err: unknown, action: string, resumed = false): never {
  // A resumed save is one whose earlier attempt may have saved the card: whatever stops this one, that is still unknown.
  if (err instanceof ProviderError && (err.kind === 'indeterminate' || resumed)) throw new OutcomeUnknownError('PROVIDER_ERROR', `${err.provider} could not ${action}: ${err.message}`);
  if (err instanceof ProviderError) throw new DomainError('PROVIDER_ERROR', `${err.provider} could not ${action}: ${err.message}`);
  throw err;
}

export interface SaveCardInput {
  paymentMethodId: string;
  email?: string;
  name?: string;
}

/** A provider's refusal of the payment method: the request's answer (422 naming payment_method_id), final. */
const refusedByProvider = (err: unknown): err is ProviderError => err instanceof ProviderError && (err.kind === 'declined' || err.kind === 'invalid_request');

const cannotSave = (issue: string) =>
  new DomainError('VALIDATION_ERROR', `Invalid request: the card cannot be saved: ${issue}`, [{ field: 'payment_method_id', issue }]);

/**
 * What a repeat of the first attempt's customer creation (same key) answers when that attempt's answer is
 * not to be had from it: the 500 the provider stored under the key and replays for 24 h, another error of
 * its (no answer in time), or a refusal of the key (sent with other parameters by an older version). Not a
 * request with the key still running (409 idempotency_key_in_use): that one may yet make the customer.
 */
const noAnswerFromKey = (err: unknown) =>
  err instanceof ProviderError && err.providerCode !== 'idempotency_key_in_use' && (err.kind === 'indeterminate' || err.providerCode === 'idempotency_error');

/**
 * One merchant's saved-card writes one at a time (a transaction-scoped advisory lock on the merchant): the
 * choice of the default card reads the other cards and must not race another save or deletion.
 */
async function lockMerchantCards(tx: EntityManager, merchantId: string): Promise<void> {
  await tx.execute(`SELECT pg_advisory_xact_lock(hashtextextended('saved_cards:' || ?, 0))`, [merchantId]);
}

/**
 * Saved cards: a provider customer with the payment method attached; only token, brand, last4, expiry
 * kept. The cards live at the provider whose port has a card vault (the contract's card API names none).
 *
 * The default card: a merchant with active cards has exactly one (`is_default`). The first card saved
 * becomes it; deleting it makes the most recently saved remaining card the default. A partial unique
 * index (saved_cards_one_default_idx) holds at most one; the per-merchant lock makes the choice race-free.
 */
export class SavedCardService {
  private readonly port: ProviderPort;
  private readonly vault: CardVault<unknown>;

  constructor(
    private readonly em: EntityManager,
    private readonly credentials: CredentialsService,
    providers: ProviderRegistry,
    private readonly idempotency: IdempotencyKeys,
    private readonly detach: CardDetachService,
    private readonly logger: Logger,
  ) {
    const port = providers.all().find((p) => p.cards);
    if (!port?.cards) throw new Error('no provider of this build keeps saved cards');
    this.port = port;
    this.vault = port.cards;
  }

  /**
   * Saves a card. With an Idempotency-Key a retry replays the first answer, and a retry after a crash or
   * an unknown outcome at the provider (502 with Payments-Outcome: unknown) resumes with the same card id,
   * finds what the earlier attempts made at the provider by it (saveAtProvider) and finishes the save with
   * that: no second customer, no second card.
   */
  async save(merchantId: string, input: SaveCardInput, idempotencyKey?: string): Promise<{ card: SavedCard; replayed: boolean }> {
    if (idempotencyKey === undefined) return { card: await this.saveAs(randomUUID(), merchantId, input, await this.credentials.require(merchantId, this.port.name), false), replayed: false };
    // No credentials (deleted since a first request with the key) is the answer for a new key only: a key
    // already used answers as it did, and one whose first request still runs is waited for (its answer, or 409).
    let creds: unknown;
    let refusal: unknown;
    try {
      creds = await this.credentials.require(merchantId, this.port.name);
    } catch (err) {
      refusal = err;
    }
    const refuse = (): never => {
      throw refusal;
    };
    const requestHash = hashRequest({ payment_method_id: input.paymentMethodId, customer_email: input.email, customer_name: input.name });
    const { value, replayed } = await this.idempotency.run({ scope: 'card.create', merchantId, key: idempotencyKey, requestHash }, 201, {
      // Nothing to write before the provider is called: the claim carries the card id the provider keys derive from.
      reserve: async () => (refusal ? refuse() : randomUUID()),
      act: async (id, resumed) => (await this.em.fork().findOne(SavedCardSchema, { id })) ?? (refusal ? refuse() : this.saveAs(id, merchantId, input, creds, resumed)),
      load: (id) => this.em.fork().findOneOrFail(SavedCardSchema, { id }),
      // The provider may have saved the card: the retry with the key resumes (the same card id, by which it
      // finds what was made), never replays the 502 for ever; nor the refusal of a dead request's resumption.
      resumable: (err) => err instanceof OutcomeUnknownError || err === refusal,
    });
    return { card: value, replayed };
  }

  /**
   * The provider's customer and attached card, then the card's row. Once the provider is asked it may have
   * saved the card: a failure of ours from there (no connection free for the row) is an unknown outcome
   * (afterProviderMayHaveActed), never the 503 "nothing was done" that a new key would answer with a second card.
   */
  private async saveAs(id: string, merchantId: string, input: SaveCardInput, creds: unknown, resumed: boolean): Promise<SavedCard> {
    try {
      return await this.saveAtProvider(id, merchantId, input, creds, resumed);
    } catch (err) {
      throw afterProviderMayHaveActed(err);
    }
  }

  private async saveAtProvider(id: string, merchantId: string, input: SaveCardInput, creds: unknown, resumed: boolean): Promise<SavedCard> {
    let saved: { customerId: string; details: SavedCardDetails };
    try {
      saved = await this.customerWithCard(id, input, creds, resumed);
    } catch (err) {
      if (err instanceof DomainError) throw err;
      if (refusedByProvider(err)) throw cannotSave(err.message);
      providerFailure(err, 'save the card', resumed);
    }
    const { customerId, details } = saved;
    return this.em.fork().transactional(async (tx) => {
      await lockMerchantCards(tx, merchantId);
      const hasDefault = (await tx.count(SavedCardSchema, { merchantId, active: true, isDefault: true })) > 0;
      const card = tx.create(SavedCardSchema, {
        id,
        merchantId,
        provider: this.port.name,
        paymentMethodToken: details.paymentMethodId,
        customerRef: customerId,
        brand: details.brand,
        last4: details.last4,
        expMonth: details.expMonth,
        expYear: details.expYear,
        isDefault: !hasDefault,
        active: true,
        providerAccount: providerAccountOf(creds),
      });
      return card;
    });
  }

  /**
   * The card's customer at the provider, with the card attached. The payment method is read first: one of
   * another type than card, or attached to another customer, is refused before anything is made (a 422
   * naming payment_method_id). Then a customer recording the card id (`savedCardId`) and the attach, with
   * provider idempotency keys derived from the card id (`card-<id>-customer`, `card-<id>-attach`). An
   * attach the provider refuses (a declining card) leaves no customer: it is deleted (best effort, logged).
   *
   * A resumed save (an earlier attempt's outcome unknown) cannot rely on those keys: the provider keeps
   * the answer of a request that began, a 500 too, and replays it to every repeat for 24 h. It finds what
   * the earlier attempts made: the payment method attached to a customer made for this card (a `pm_…` the
   * merchant's page made); else the first attempt's customer, as its key's repeat answers it, or one
   * found by the card id; a card already attached to it (a test token becomes a new `pm_…` when
   * attached); and does what is left with keys of its own (`…-<uuid>`), which no stored 500 answers.
   */
  private async customerWithCard(id: string, input: SaveCardInput, creds: unknown, resumed: boolean): Promise<{ customerId: string; details: SavedCardDetails }> {
    const method = await this.vault.paymentMethod(creds, input.paymentMethodId);
    if (method.type !== 'card') throw cannotSave(`${input.paymentMethodId} is a ${method.type} payment method, not a card`);
    if (method.customer) {
      if (method.customer.savedCardId === id && method.card) return { customerId: method.customer.id, details: method.card };
      throw cannotSave('The payment method you provided has already been attached to a customer.');
    }
    const customer = { email: input.email, name: input.name, savedCardId: id };
    let customerId: string | undefined;
    if (resumed) {
      const earlier = await this.earlierCustomers(id, customer, creds);
      for (const candidate of earlier) {
        const [card] = await this.vault.cardsOf(creds, candidate);
        if (card) return { customerId: candidate, details: card };
      }
      customerId = earlier[0];
    }
    const suffix = resumed ? `-${randomUUID()}` : '';
    customerId ??= (await this.vault.createCustomer(creds, { ...customer, idempotencyKey: `card-${id}-customer${suffix}` })).customerId;
    try {
      return { customerId, details: await this.vault.attachPaymentMethod(creds, { paymentMethodId: input.paymentMethodId, customerId, idempotencyKey: `card-${id}-attach${suffix}` }) };
    } catch (err) {
      if (refusedByProvider(err)) await this.deleteCustomer(id, customerId, creds);
      throw err;
    }
  }

  /**
   * The customers earlier attempts of the save `id` made: the first attempt's, as a repeat of its request
   * (the same key) answers it — the provider's stored answer, or a customer made now if that request never
   * reached it — else those the provider finds by the card id (its search trails writes: one made a moment
   * ago can be missed, and a new customer is then made).
   */
  private async earlierCustomers(id: string, customer: { email?: string; name?: string; savedCardId: string }, creds: unknown): Promise<string[]> {
    try {
      return [(await this.vault.createCustomer(creds, { ...customer, idempotencyKey: `card-${id}-customer` })).customerId];
    } catch (err) {
      if (!noAnswerFromKey(err)) throw err;
    }
    return this.vault.customersOfSavedCard(creds, id);
  }

  /** A customer made for a save the provider refused: nothing else refers to it. Best effort; one left behind is logged. */
  private async deleteCustomer(id: string, customerId: string, creds: unknown): Promise<void> {
    try {
      await this.vault.deleteCustomer(creds, customerId);
    } catch (err) {
      this.logger.warn({ cardId: id, customer: customerId, err: { message: (err as Error).message } },
        'the customer made for a saved card the provider refused could not be deleted: delete it in the provider\'s dashboard');
    }
  }

  async list(merchantId: string, page: number, pageSize: number) {
    const [items, total] = await this.em.findAndCount(SavedCardSchema, { merchantId, active: true }, {
      orderBy: { createdAt: 'asc', id: 'asc' },
      limit: pageSize,
      offset: (page - 1) * pageSize,
    });
    return { items, total };
  }

  /**
   * Deactivates the card: it can no longer be charged, nor is it listed. In the same transaction its
   * detach at the provider is marked due (saved_cards.detach_due_at); after the commit the detach is tried
   * (CardDetachService), and one that cannot be done now — the provider unreachable, no card credentials
   * any more, credentials of another provider account — stays due and is retried by the worker until the
   * provider confirms it (or, after a bounded time, given up on and logged for an operator). The answer
   * does not wait for it: the card is deleted either way, and the service never charges an inactive card.
   * When the card was the default, the most recently saved remaining card becomes the default.
   */
  async remove(merchantId: string, id: string): Promise<void> {
    const deleted = await this.em.fork().transactional(async (tx) => {
      await lockMerchantCards(tx, merchantId);
      // FOR UPDATE: waits for a payment's create being marked as sent (saved-card-sends.ts), and a mark after this commit finds the card inactive.
      const [row] = await tx.execute<{ id: string; is_default: boolean }[]>('SELECT id::text AS id, is_default FROM saved_cards WHERE id = ? AND merchant_id = ? AND active FOR UPDATE', [id, merchantId]);
      if (!row) return null; // none, another merchant's, or deleted already (meanwhile too)
      await tx.execute(`UPDATE saved_cards SET active = false, is_default = false, deleted_at = now(), detach_due_at = ${DETACH_DUE_SQL} WHERE id = ?`, [id], 'run');
      if (!row.is_default) return row.id;
      await tx.execute(
        `UPDATE saved_cards SET is_default = true
          WHERE id = (SELECT id FROM saved_cards WHERE merchant_id = ? AND active ORDER BY created_at DESC, id DESC LIMIT 1)`,
        [merchantId],
        'run',
      );
      return row.id;
    });
    if (!deleted) throw notFound('saved card');
    // A charge of the card whose create was already being sent when the card was deactivated goes out (it
    // began first); the 200 waits for it, so no create of the card is sent after it (saved-card-sends.ts).
    await waitForCardSends(this.em, merchantId, deleted);
    await this.detach.detachAfterDelete(id);
  }
}
