import { pino, type DestinationStream, type Logger } from 'pino';
import { safeError } from './safe-error.js';

export type { Logger };

/**
 * Structured JSON logs. Request logs carry method, route, status and timing only — never headers or
 * bodies — and the redact list is a second line of defence for anything that slips into a log object.
 * Every `err` passes through safeError: database errors (which quote the statement, its parameters and
 * so request data) are logged as their class and SQLSTATE only.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'payments' },
    serializers: { err: safeError, error: safeError },
    redact: {
      paths: [
        '*.headers', 'headers', '*.authorization', '*["x-api-key"]', '*.apiKey', '*.key',
        '*.secret', '*.secret_key', '*.client_secret', '*.consumer_secret', '*.passkey',
        '*.webhook_secret', '*.security_credential', '*.password',
      ],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
