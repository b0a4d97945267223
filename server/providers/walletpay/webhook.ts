import type { WalletpayCredentials } from '../../../contract/index.js';
import type { InboundRequest, Money } from '../../domain/ports.js';
import type { WalletpayAdapter } from './adapter.js';
import {
  EVENT_MAPPING,
  REFUND_STATUS,
  captureFailureReason,
  captureIdOfRefund,
  moneyOf,
  type WireEvent,
  type WireRefundStatus,
} from './transformers.js';

/** An inbound walletpay event, reduced to what the service acts on. */
export type WalletpayInboundEvent =
  | {
    kind: 'payment';
    /** The event id (`WH-…`); de-duplication uses the transmission id header instead. */
    eventId: string | null;
    eventType: string;
    /** The order (= the payment's provider_ref), from `resource.supplementary_data.related_ids.order_id`. */
    orderId: string | null;
    captureId: string;
    /** Our payment id, which the adapter sent as the purchase unit's custom_id. */
    customId: string | null;
    status: 'completed' | 'failed';
    amount: Money | null;
    /** Why, when the capture failed: as the capture's answer says it (`capture DECLINED (<reason>)`). */
    failureReason: string | null;
  }
  | {
    kind: 'refund';
    eventId: string | null;
    eventType: string;
    /** The refunded capture, from the refund's `rel: "up"` link. */
    captureId: string | null;
    refundId: string;
    /** Our refund id when the refund was made by the service (sent as custom_id). */
    customId: string | null;
    status: 'completed' | 'pending' | 'failed';
    /** The refunded amount as the provider reports it. */
    amount: Money | null;
    /** Why, when the refund failed. */
    failureReason: string | null;
  }
  | { kind: 'ignored'; eventId: string | null; eventType: string | null };

/** Header names as interface.md gives them, with the real provider's PAYPAL-* names as a fallback. */
function header(callback: InboundRequest, name: string): string | undefined {
  const lower = name.toLowerCase();
  const paypal = lower.replace(/^walletpay-/, 'paypal-');
  for (const key of [lower, name, paypal]) {
    const value = callback.headers[key];
    if (typeof value === 'string' && value !== '') return value;
  }
  return undefined;
}

/** The transmission id: what inbound walletpay callbacks are de-duplicated by. */
export function walletpayTransmissionId(callback: InboundRequest): string | null {
  return header(callback, 'Walletpay-Transmission-Id') ?? null;
}

const TRANSMISSION_ID = /^[A-Za-z0-9_-]{8,64}$/;
const SIGNATURE = /^[A-Za-z0-9+/]{16,2048}={0,2}$/;
const AUTH_ALGOS = new Set(['SHA256withRSA']);
/** The provider retries a transmission (same id and time) for up to three days. */
const MAX_TRANSMISSION_AGE_MS = 72 * 3_600_000;
const MAX_CLOCK_SKEW_MS = 5 * 60_000;

/**
 * What is wrong with a callback's signature headers, checked locally (shape, a plausible transmission
 * time, a known algorithm), or null. Runs before anything costly: a forged callback that fails here
 * costs no database lookup and no verification call with the merchant's credentials.
 */
export function walletpayHeaderProblem(callback: InboundRequest, now = Date.now()): string | null {
  const transmissionId = header(callback, 'Walletpay-Transmission-Id');
  const time = header(callback, 'Walletpay-Transmission-Time');
  const sig = header(callback, 'Walletpay-Transmission-Sig');
  const certUrl = header(callback, 'Walletpay-Cert-Url');
  const algo = header(callback, 'Walletpay-Auth-Algo');
  if (!transmissionId || !TRANSMISSION_ID.test(transmissionId)) return 'Walletpay-Transmission-Id is missing or malformed';
  const sent = time && /^\d{4}-\d\d-\d\dT/.test(time) ? Date.parse(time) : NaN;
  if (Number.isNaN(sent)) return 'Walletpay-Transmission-Time is missing or not an ISO 8601 time';
  if (sent > now + MAX_CLOCK_SKEW_MS || sent < now - MAX_TRANSMISSION_AGE_MS) return 'Walletpay-Transmission-Time is outside the accepted window';
  if (!sig || !SIGNATURE.test(sig)) return 'Walletpay-Transmission-Sig is missing or not base64';
  if (!certUrl || certUrl.length > 2048 || !/^https?:\/\//.test(certUrl) || !URL.canParse(certUrl)) return 'Walletpay-Cert-Url is missing or not a URL';
  if (algo !== undefined && !AUTH_ALGOS.has(algo)) return 'Walletpay-Auth-Algo is not supported';
  return null;
}

function eventBody(callback: InboundRequest): Record<string, unknown> | null {
  if (typeof callback.body === 'object' && callback.body !== null && !Array.isArray(callback.body)) return callback.body as Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(callback.rawBody.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * Verifies an inbound event against the merchant's stored `webhook_id` (never the one the request
 * claims: a `Walletpay-Webhook-Id` header that disagrees with it is rejected outright). Offline first,
 * as PayPal recommends: CRC-32 of the raw body and SHA256withRSA with the certificate downloaded from
 * the provider's own host (cached), so a forged callback costs no call with the merchant's
 * credentials. Only when that cannot be done (another algorithm, the certificate unobtainable, a
 * simulator or override, with sandbox credentials, whose certificate is named on another address than
 * the base URL) does the
 * verify-webhook-signature postback decide. Missing signature headers or no stored webhook id →
 * 'invalid'. The provider being unreachable for the postback is not a verdict: its ProviderError is
 * thrown, so the caller answers 5xx and the provider retries.
 */
export async function verifyWalletpayEvent(
  adapter: WalletpayAdapter,
  creds: WalletpayCredentials,
  callback: InboundRequest,
): Promise<'verified' | 'invalid'> {
  const webhookId = creds.webhook_id;
  if (!webhookId) return 'invalid';
  const claimed = header(callback, 'Walletpay-Webhook-Id');
  if (claimed !== undefined && claimed !== webhookId) return 'invalid';
  const transmissionId = header(callback, 'Walletpay-Transmission-Id');
  const transmissionTime = header(callback, 'Walletpay-Transmission-Time');
  const transmissionSig = header(callback, 'Walletpay-Transmission-Sig');
  const certUrl = header(callback, 'Walletpay-Cert-Url');
  const authAlgo = header(callback, 'Walletpay-Auth-Algo') ?? 'SHA256withRSA';
  const event = eventBody(callback);
  if (!transmissionId || !transmissionTime || !transmissionSig || !certUrl || !event || walletpayHeaderProblem(callback) !== null) return 'invalid';
  const offline = await adapter.verifyTransmissionOffline(creds, {
    transmissionId,
    transmissionTime,
    transmissionSig,
    certUrl,
    authAlgo,
    webhookId,
    rawBody: callback.rawBody,
  });
  if (offline !== 'unverifiable') return offline;
  const ok = await adapter.verifyWebhookSignature(creds, {
    authAlgo,
    certUrl,
    transmissionId,
    transmissionSig,
    transmissionTime,
    webhookId,
    webhookEvent: event,
  });
  return ok ? 'verified' : 'invalid';
}

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);


/** Maps a (verified) event body through the event table in transformers.ts. */
export function parseWalletpayEvent(body: unknown): WalletpayInboundEvent {
  const event = (typeof body === 'object' && body !== null ? body : {}) as WireEvent;
  const eventId = str(event.id);
  const eventType = str(event.event_type);
  const mapping = eventType && Object.hasOwn(EVENT_MAPPING, eventType) ? EVENT_MAPPING[eventType] : undefined;
  const resource = (event.resource ?? {}) as Record<string, unknown>;
  const resourceId = str(resource.id);
  if (!mapping || !eventType || !resourceId) return { kind: 'ignored', eventId, eventType };

  if (mapping.kind === 'payment') {
    const related = (resource.supplementary_data as { related_ids?: { order_id?: unknown } } | undefined)?.related_ids;
    // The capture's own status (DECLINED for a DENIED event too); else the event type's last word.
    const captureStatus = str(resource.status) ?? eventType.split('.').at(-1)!;
    const captureReason = str((resource.status_details as { reason?: unknown } | undefined)?.reason);
    return {
      kind: 'payment',
      eventId,
      eventType,
      orderId: str(related?.order_id),
      captureId: resourceId,
      customId: str(resource.custom_id),
      status: mapping.status,
      amount: moneyOf(resource.amount),
      failureReason: mapping.status === 'failed' ? captureFailureReason(captureStatus, captureReason) : null,
    };
  }

  const refundStatus = str(resource.status) as WireRefundStatus | null;
  const amount = moneyOf(resource.amount);
  // The resource's own status when it names one we know; else what the event type says (EVENT_MAPPING).
  const status = refundStatus && Object.hasOwn(REFUND_STATUS, refundStatus) ? REFUND_STATUS[refundStatus] : mapping.status;
  const reason = str((resource.status_details as { reason?: unknown } | undefined)?.reason);
  return {
    kind: 'refund',
    eventId,
    eventType,
    captureId: captureIdOfRefund(resource as { links?: { href: string; rel: string }[] }),
    refundId: resourceId,
    customId: str(resource.custom_id),
    status,
    amount,
    failureReason: status === 'failed' ? `refund ${refundStatus ?? 'FAILED'} at walletpay (${eventType}${reason ? `: ${reason}` : ''})` : null,
  };
}
