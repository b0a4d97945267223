import type { WebhookEventType } from '../../../contract/index.js';
import type { MerchantEventType } from '../events/merchant-events.js';

/**
 * The contract (filter values, SDK types) and the domain each list the event types; this fails to
 * compile the moment the two lists differ.
 */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const EVENT_TYPE_LISTS_MATCH: Same<WebhookEventType, MerchantEventType> = true;
