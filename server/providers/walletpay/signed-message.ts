/**
 * The string PayPal signs for a webhook transmission, as its "Verify webhook signatures" guide writes it:
 * `transmissionId|timeStamp|webhookId|crc32`, the CRC-32 of the raw body in unsigned decimal. The adapter's
 * own: the simulator writes its own, so a mistake here fails the sandbox as it would fail every real delivery.
 */
export const walletpaySignedMessage = (transmissionId: string, transmissionTime: string, webhookId: string, rawBody: Buffer | string) =>
  `${transmissionId}|${transmissionTime}|${webhookId}|${crc32(rawBody)}`;

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** Unsigned CRC-32 (IEEE 802.3, the one PayPal's SDKs take from java.util.zip / zlib) of the bytes. */
export function crc32(data: Buffer | string): number {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  let crc = 0xffffffff;
  for (const b of bytes) crc = CRC_TABLE[(crc ^ b) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
