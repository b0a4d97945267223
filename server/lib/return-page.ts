/**
 * Where the cardholder's browser lands after 3-D Secure when the merchant gave no return_url: a page the
 * service hosts (server/http/return-page.ts). The cardpay adapter sends this address, the app serves it.
 */
export const CARDPAY_RETURN_PATH = '/return/cardpay';

export function cardpayReturnPageUrl(publicBaseUrl: string): string {
  return `${publicBaseUrl}${CARDPAY_RETURN_PATH}`;
}
