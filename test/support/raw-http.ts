import net from 'node:net';

/** A request exactly as written on the wire: nothing is validated or normalised on the way. */
export interface RawRequest {
  method: string;
  /** The request target as sent (already percent-encoded, or deliberately not). */
  target: string;
  headers: [string, string][];
  body?: Buffer | string;
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function decodeChunked(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', offset);
    if (lineEnd < 0) break;
    const size = Number.parseInt(data.subarray(offset, lineEnd).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

/**
 * Sends one HTTP/1.1 request over a fresh connection (`Connection: close`) and reads the whole answer.
 * Content-Length is added unless the caller sets it. Used where a normal client would refuse or
 * rewrite the request (bad percent-encoding, odd header values, broken bodies).
 */
export async function rawRequest(port: number, req: RawRequest, timeoutMs = 15_000): Promise<RawResponse> {
  const body = req.body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(req.body) ? req.body : Buffer.from(req.body, 'utf8');
  const headers = [...req.headers];
  if (!headers.some(([name]) => name.toLowerCase() === 'content-length') && (body.length > 0 || ['POST', 'PUT', 'PATCH'].includes(req.method))) {
    headers.push(['Content-Length', String(body.length)]);
  }
  const head = `${req.method} ${req.target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => socket.destroy(new Error('raw request timed out')), timeoutMs);
    const finish = () => {
      clearTimeout(timer);
      const data = Buffer.concat(chunks);
      const split = data.indexOf('\r\n\r\n');
      if (split < 0) return reject(new Error(`no complete response (${data.length} bytes)`));
      const lines = data.subarray(0, split).toString('latin1').split('\r\n');
      const status = Number(lines[0]!.split(' ')[1]);
      const headerMap: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        if (colon > 0) headerMap[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      let payload: Buffer = data.subarray(split + 4);
      if (headerMap['transfer-encoding']?.includes('chunked')) payload = decodeChunked(payload);
      resolve({ status, headers: headerMap, body: payload.toString('utf8') });
    };
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => {
      socket.end();
      finish();
    });
    // A server may answer (e.g. 413) and close before reading everything we send: keep what arrived.
    socket.on('error', (err) => (chunks.length > 0 ? finish() : (clearTimeout(timer), reject(err))));
    // No half-close: the server answers, then closes the connection itself (Connection: close).
    socket.write(head);
    if (body.length > 0) socket.write(body);
  });
}
