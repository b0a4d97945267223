import zlib from 'node:zlib';

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** Unsigned CRC-32 (IEEE) of the bytes: zlib's when the runtime has it (Node ≥ 20.15), else a table. */
export function crc32(data: Buffer | string): number {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  if (typeof zlib.crc32 === 'function') return zlib.crc32(bytes) >>> 0;
  let crc = 0xffffffff;
  for (const b of bytes) crc = CRC_TABLE[(crc ^ b) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/**
 * PayPal's signed string for a webhook transmission: `transmissionId|transmissionTime|webhookId|crc32`,
 * the CRC-32 of the raw body in unsigned decimal. The simulator signs it, the adapter verifies it.
 */
export const walletpaySignedMessage = (transmissionId: string, transmissionTime: string, webhookId: string, rawBody: Buffer | string) =>
  `${transmissionId}|${transmissionTime}|${webhookId}|${crc32(rawBody)}`;
