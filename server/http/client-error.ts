import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorCode } from '../../contract/index.js';
import type { Logger } from '../observability/logger.js';
import { errorEnvelope } from './envelope.js';
import { newRequestId } from './middleware/request-context.js';

/**
 * Node's answers to a request its HTTP parser refuses (its default 'clientError' behaviour), each as an
 * envelope code. Status and message say what was wrong, never what was sent.
 */
const REFUSALS: Record<string, { status: number; code: ErrorCode; message: string }> = {
  HPE_HEADER_OVERFLOW: { status: 431, code: 'BAD_REQUEST', message: 'Request header fields too large' },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: { status: 413, code: 'PAYLOAD_TOO_LARGE', message: 'Chunk extensions too large' },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, code: 'BAD_REQUEST', message: 'The request was not received in time' },
};
const MALFORMED = { status: 400, code: 'BAD_REQUEST' as const, message: 'Malformed HTTP request' };

/**
 * The server's 'clientError' handler: a request Node's parser refuses (an oversized header, a control
 * character, a broken request line) gets what every answer gets — the error envelope and an X-Request-Id —
 * instead of Node's bare status line, then the connection is closed. Nothing is written when the peer is
 * gone or the connection already carries a response (one for an earlier request on it, under way or sent).
 */
export function refuseMalformedRequest(logger: Logger) {
  return (err: NodeJS.ErrnoException, socket: Duplex): void => {
    const busy = Boolean((socket as { _httpMessage?: unknown })._httpMessage);
    if (err.code === 'ECONNRESET' || !socket.writable || busy) {
      socket.destroy();
      return;
    }
    const { status, code, message } = (err.code && REFUSALS[err.code]) || MALFORMED;
    const requestId = newRequestId();
    const body = JSON.stringify(errorEnvelope(requestId, code, message));
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        'Connection: close\r\n' +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\n\r\n${body}`,
      () => socket.destroy(),
    );
    logger.info({ requestId, status, parserError: err.code }, 'request refused by the HTTP parser');
  };
}
