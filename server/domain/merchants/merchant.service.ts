import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Provider } from '../../../contract/index.js';
import { MerchantSchema, ProviderCredentialSchema, type Merchant } from '../../persistence/entities/index.js';
import type { SecretBox } from '../crypto/secret-box.js';
import { removeRegistration } from '../delivery/delivery-store.js';
import { generateWebhookSecret } from '../crypto/tokens.js';
import { DomainError, notFound } from '../errors.js';
import { assertDeliverableUrl, type HostResolver } from './webhook-url-policy.js';

export interface MerchantView {
  merchant: Merchant;
  providers: Provider[];
}

/** The merchant record and its webhook registration. */
export class MerchantService {
  constructor(
    private readonly em: EntityManager,
    private readonly secrets: SecretBox,
    private readonly allowPrivateWebhookUrls: boolean,
    private readonly hosts: HostResolver,
  ) {}

  async create(name: string): Promise<Merchant> {
    const trimmed = name.trim();
    if (!trimmed || trimmed.length > 200) throw new DomainError('VALIDATION_ERROR', 'name must be 1 to 200 characters');
    const merchant = this.em.create(MerchantSchema, { id: randomUUID(), name: trimmed });
    await this.em.persistAndFlush(merchant);
    return merchant;
  }

  async get(merchantId: string): Promise<MerchantView> {
    const merchant = await this.em.findOne(MerchantSchema, { id: merchantId });
    if (!merchant) throw notFound('merchant');
    const credentials = await this.em.find(ProviderCredentialSchema, { merchantId }, { fields: ['provider'], orderBy: { provider: 'asc' } });
    return { merchant, providers: credentials.map((c) => c.provider as Provider) };
  }

  /**
   * Registers (or re-registers) the webhook URL; returns the new secret, which is never shown again.
   * One UPDATE writing URL and secret together, never a read-modify-flush: the ORM's flush writes only
   * the fields that differ from what it read, so of two calls at once, one registering the URL already
   * stored could keep the other's URL with its own secret. The UPDATE holds the row lock until it
   * commits, so concurrent calls are serialised: each answers exactly the URL and secret its own
   * commit stored, and the merchant keeps the last one committed (an earlier caller's secret is then
   * superseded, as by any later re-registration).
   */
  async setWebhook(merchantId: string, webhookUrl: string): Promise<{ webhookUrl: string; webhookSecret: string }> {
    const url = (await assertDeliverableUrl(webhookUrl, { allowPrivate: this.allowPrivateWebhookUrls, hosts: this.hosts, merchantId })).toString();
    const secret = generateWebhookSecret();
    const updated = await this.em.nativeUpdate(MerchantSchema, { id: merchantId }, { webhookUrl: url, webhookSecretEnc: this.secrets.seal(secret), updatedAt: new Date() });
    if (updated === 0) throw notFound('merchant');
    return { webhookUrl: url, webhookSecret: secret };
  }

  /**
   * DELETE /v1/merchant/webhook: turns delivery off (idempotent). URL and secret are cleared together, and
   * the deliveries still due ended, in one transaction (removeRegistration); no later attempt goes to the old
   * URL (DeliveryService.attempt ends any that finds no registration), and one under way that fails is
   * ended, not retried (finishAttempt).
   */
  async removeWebhook(merchantId: string): Promise<void> {
    if (!(await removeRegistration(this.em, merchantId))) throw notFound('merchant');
  }

  /** The decrypted signing secret, for the delivery worker. */
  async webhookSecret(merchantId: string): Promise<string | null> {
    const merchant = await this.em.findOne(MerchantSchema, { id: merchantId });
    return this.openWebhookSecret(merchant?.webhookSecretEnc ?? null);
  }

  /** Decrypts a signing secret the delivery worker read with its lease (no lookup of its own). */
  openWebhookSecret(sealed: string | null): string | null {
    return sealed ? this.secrets.open(sealed) : null;
  }
}
