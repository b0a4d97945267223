import type { EntityManager } from '@mikro-orm/postgresql';
import type { Provider } from '../../../contract/index.js';
import type { Logger } from '../../observability/logger.js';
import { SavedCardSchema, type SavedCard } from '../../persistence/entities/index.js';
import type { CredentialsService } from '../merchants/credentials.service.js';
import { ProviderError, providerAccountOf, type ProviderRegistry } from '../ports.js';
import { checkClaimed, oneBatchRun, outcomeOf, type CheckOutcome, type ClaimedBatch, type DrainRun } from '../payments/sync-schedule.js';

/**
 * How long a claimed detach is left to its attempt before another may take it again: the DELETE's own
 * attempt right after its commit, or a worker's. Also the first retry's delay.
 */
export const DETACH_CLAIM_MS = 5 * 60_000;
/** The longest wait between two retries of one detach (the delay doubles from DETACH_CLAIM_MS up to this). */
const MAX_RETRY_DELAY_MS = 6 * 3_600_000;
/** After this long since the card was deleted, a detach that still could not be done is given up on: logged at error for an operator. */
export const DETACH_GIVE_UP_MS = 30 * 24 * 3_600_000;

/**
 * What `saved_cards.detach_due_at` is set to in the transaction that deactivates a card: claimed for the
 * DELETE's own attempt after its commit (DETACH_CLAIM_MS), then the worker's.
 */
export const DETACH_DUE_SQL = `now() + (${DETACH_CLAIM_MS} * interval '1 millisecond')`;

/** Why a detach is retried rather than done or given up on. */
type Postponed = { kind: string; reason: string; outcome: CheckOutcome };

/**
 * Detaches a deleted saved card's payment method from its customer at the provider, until the provider
 * confirms it. The DELETE deactivates the card (never charged again from its 200 on) and marks the detach
 * due (`saved_cards.detach_due_at`) in the same transaction; it then tries the detach itself, after the
 * commit, and clears the mark when it is done. A detach that could not be done — the provider unreachable,
 * 5xx, no answer in time, rate limiting, refused credentials; no cardpay credentials any more; credentials
 * of another provider account than the card's (which does not know its payment method: its "no such
 * payment method" would say nothing) — stays due: the worker's job (cards.detach-due) claims due cards
 * (SKIP LOCKED, no connection held across the provider call), retries them with a doubling delay
 * (5 minutes up to 6 hours), and storing credentials again makes the merchant's due detaches due at once
 * (`credentialsStored`). An answer that the payment method is not attached counts as done; one that it
 * does not exist, only when the card's account is recorded and the stored credentials are of it. Through
 * credentials whose account is not known to be the card's (a card saved before the account was recorded,
 * credentials stored before it was read), "no such payment method" proves nothing — the card may be
 * attached under another account — and a retry through them would answer the same: the detach is given
 * up on. So is one still not done DETACH_GIVE_UP_MS (30 days) after the deletion, or refused by the
 * provider as a bad request (a retry would be refused again). A detach given up on is logged at error with
 * the card, its payment method and its customer, for an operator to detach by hand. Each retry is logged
 * (warn), and the `saved_cards_detach_due` gauge counts the detaches due.
 */
export class CardDetachService {
  constructor(
    private readonly em: EntityManager,
    private readonly credentials: CredentialsService,
    private readonly providers: ProviderRegistry,
    private readonly logger: Logger,
  ) {}

  /** One batch: claims up to `limit` due detaches and tries them (the job claims batch after batch: jobs/drain-due.ts). */
  async detachDue(run: DrainRun = oneBatchRun(), limit = 25): Promise<ClaimedBatch> {
    const claimed = await this.em.getConnection().execute<{ id: string; account: string }[]>(
      `UPDATE saved_cards SET detach_due_at = now() + (? * interval '1 millisecond')
       WHERE id IN (SELECT id FROM saved_cards WHERE detach_due_at <= now() ORDER BY detach_due_at LIMIT ? FOR UPDATE SKIP LOCKED)
       RETURNING id, merchant_id || ':' || provider AS account`,
      [DETACH_CLAIM_MS, limit],
    );
    return checkClaimed(claimed, ({ id }) => this.detachOne(id, 'retry'), ({ id }, err) =>
      this.logger.warn({ cardId: id, err: { message: err.message } }, 'detaching a deleted saved card at the provider failed'), { accountOf: (row) => row.account, run });
  }

  /**
   * The DELETE's own attempt, after the commit that deactivated the card: never thrown (the card is
   * deleted whatever happens here; a detach not done stays due for the worker).
   */
  async detachAfterDelete(cardId: string): Promise<void> {
    try {
      await this.detachOne(cardId, 'delete');
    } catch (err) {
      this.logger.warn({ cardId, err: { message: (err as Error).message } }, 'saved card deleted; its detach at the provider could not be tried: the worker retries it');
    }
  }

  /**
   * Tries the detach of a deleted card whose detach is due, and clears the mark once done (or given up on);
   * else leaves it due for the next retry. Says whether the provider could be asked.
   */
  async detachOne(cardId: string, trigger: 'delete' | 'retry' = 'retry'): Promise<CheckOutcome> {
    const card = await this.em.fork().findOne(SavedCardSchema, { id: cardId });
    if (!card?.detachDueAt) return 'checked';
    const log = { cardId, merchantId: card.merchantId, provider: card.provider, paymentMethod: card.paymentMethodToken, customerRef: card.customerRef, trigger };
    const postponed = await this.attempt(card);
    if (postponed === null) {
      await this.clear(cardId);
      if (trigger === 'retry') this.logger.info(log, 'deleted saved card detached at the provider on a retry');
      return 'checked';
    }
    const age = Date.now() - (card.deletedAt ?? card.createdAt).getTime();
    // A refusal, or a "no such payment method" from an account that may not be the card's: a retry through the same credentials would answer the same.
    const transient = postponed.kind !== 'invalid_request' && postponed.kind !== 'declined' && postponed.kind !== 'unproven';
    if (transient && age < DETACH_GIVE_UP_MS) {
      const delayMs = Math.min(MAX_RETRY_DELAY_MS, Math.max(DETACH_CLAIM_MS, age));
      await this.em.getConnection().execute(
        `UPDATE saved_cards SET detach_due_at = now() + (? * interval '1 millisecond') WHERE id = ? AND detach_due_at IS NOT NULL`,
        [delayMs, cardId], 'run',
      );
      this.logger.warn({ ...log, kind: postponed.kind, reason: postponed.reason, retryInMs: delayMs },
        trigger === 'delete'
          ? 'saved card deleted (no longer listed nor charged); its payment method could not be detached at the provider: retried by the worker'
          : 'a deleted saved card could not be detached at the provider; retrying later');
      return postponed.outcome;
    }
    await this.clear(cardId);
    this.logger.error({ ...log, kind: postponed.kind, reason: postponed.reason },
      transient
        ? `a deleted saved card could not be detached at the provider within ${DETACH_GIVE_UP_MS / 86_400_000} days; given up: detach its payment method from its customer by hand`
        : postponed.kind === 'unproven'
          ? 'the provider has no such payment method under the stored credentials, whose account may not be the one the deleted saved card was saved under: it may still be attached to its customer under another account; given up: check that account and detach it by hand'
          : 'the provider refused to detach a deleted saved card; given up: detach its payment method from its customer by hand');
    return postponed.outcome;
  }

  /**
   * After a merchant stored credentials for `provider`: its cards whose detach waits (for credentials, or
   * for those of the card's account) are due now, not at their next retry.
   */
  async credentialsStored(merchantId: string, provider: Provider): Promise<void> {
    await this.em.getConnection().execute(
      `UPDATE saved_cards SET detach_due_at = now() WHERE merchant_id = ? AND provider = ? AND detach_due_at > now()`,
      [merchantId, provider], 'run',
    );
  }

  /** The detach at the provider; null when done, else why it was not. */
  private async attempt(card: SavedCard): Promise<Postponed | null> {
    const provider = card.provider as Provider;
    const vault = this.providers.find(provider)?.cards;
    if (!vault) return { kind: 'not_asked', reason: `${provider} does not keep saved cards in this build`, outcome: 'checked' };
    let creds: unknown;
    try {
      creds = await this.credentials.find(card.merchantId, provider);
    } catch (err) {
      // An error of this process (credentials it cannot decrypt): nothing was sent.
      return { kind: 'not_asked', reason: (err as Error).message, outcome: 'checked' };
    }
    if (!creds) return { kind: 'no_credentials', reason: `the merchant has no ${provider} credentials any more: detached once they are stored again`, outcome: 'checked' };
    const stored = providerAccountOf(creds);
    if (card.providerAccount && stored && stored !== card.providerAccount) {
      return {
        kind: 'other_account',
        reason: `the card was saved on ${provider} account ${card.providerAccount} and the stored credentials are of account ${stored}: detached once credentials of account ${card.providerAccount} are stored again`,
        outcome: 'checked',
      };
    }
    try {
      const result = await vault.detachPaymentMethod(creds, card.paymentMethodToken);
      // "No such payment method" proves the detach only from the card's own account: another's never had it.
      if (result === 'missing' && !(card.providerAccount && stored && stored === card.providerAccount)) {
        return {
          kind: 'unproven',
          reason: `${provider} has no such payment method under the stored credentials' account (${stored ?? 'unknown'}), and the card was saved under ${card.providerAccount ? `account ${card.providerAccount}` : 'an account not recorded'}: it may still be attached under another account`,
          outcome: 'checked',
        };
      }
      return null;
    } catch (err) {
      if (!(err instanceof ProviderError)) return { kind: 'not_asked', reason: (err as Error).message, outcome: 'checked' };
      return { kind: err.kind, reason: err.message, outcome: outcomeOf(err) };
    }
  }

  private async clear(cardId: string): Promise<void> {
    await this.em.getConnection().execute('UPDATE saved_cards SET detach_due_at = NULL WHERE id = ?', [cardId], 'run');
  }
}
