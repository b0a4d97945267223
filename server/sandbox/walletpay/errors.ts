import { randomBytes } from 'node:crypto';
import type { Response } from 'express';

export interface ErrorDetail {
  field?: string;
  value?: string;
  location?: 'body' | 'path' | 'query' | 'header';
  issue: string;
  description: string;
}

/** PayPal's error `name` for each HTTP status it answers with. */
const NAME_BY_STATUS: Record<number, string> = {
  400: 'INVALID_REQUEST',
  401: 'AUTHENTICATION_FAILURE',
  403: 'NOT_AUTHORIZED',
  404: 'RESOURCE_NOT_FOUND',
  409: 'RESOURCE_CONFLICT',
  422: 'UNPROCESSABLE_ENTITY',
  500: 'INTERNAL_SERVER_ERROR',
};

const MESSAGE_BY_STATUS: Record<number, string> = {
  400: 'Request is not well-formed, syntactically incorrect, or violates schema.',
  401: 'Authentication failed due to invalid authentication credentials or a missing Authorization header.',
  403: 'Authorization failed due to insufficient permissions.',
  404: 'The specified resource does not exist.',
  409: 'The server has detected a conflict while processing this request.',
  422: 'The requested action could not be performed, semantically incorrect, or failed business validation.',
  500: 'An internal server error has occurred.',
};

/**
 * Thrown by handlers; the simulator's error middleware answers with PayPal's error body
 * `{name, message, debug_id, details:[{field, value, location, issue, description}], links}`.
 */
export class PaypalError extends Error {
  constructor(
    readonly status: number,
    readonly details: ErrorDetail[] = [],
    message?: string,
    /** The v1 APIs name some errors by their issue (e.g. WEBHOOK_URL_ALREADY_EXISTS). */
    readonly errorName?: string,
  ) {
    super(message ?? MESSAGE_BY_STATUS[status] ?? 'Error');
  }

  body(): Record<string, unknown> {
    const issue = this.details[0]?.issue;
    return {
      name: this.errorName ?? NAME_BY_STATUS[this.status] ?? 'INTERNAL_SERVER_ERROR',
      message: this.message,
      debug_id: randomBytes(7).toString('hex').slice(0, 13),
      ...(this.details.length > 0 ? { details: this.details } : {}),
      links: [
        {
          href: `https://developer.paypal.com/docs/api/orders/v2/#error-${issue ?? NAME_BY_STATUS[this.status] ?? 'ERROR'}`,
          rel: 'information_link',
          method: 'GET',
        },
      ],
    };
  }
}

export const invalid = (issue: string, field: string, description: string, location: ErrorDetail['location'] = 'body', value?: string) =>
  new PaypalError(400, [{ field, ...(value !== undefined ? { value } : {}), location, issue, description }]);

export const unprocessable = (issue: string, description: string, field?: string) =>
  new PaypalError(422, [{ ...(field ? { field, location: 'body' as const } : {}), issue, description }]);

export const notFound = (issue: string, description: string, field?: string) =>
  new PaypalError(404, [{ ...(field ? { field, location: 'path' as const } : {}), issue, description }]);

export function sendError(res: Response, err: PaypalError): void {
  res.status(err.status).json(err.body());
}

/** The body of every 500 the simulator gives, including the outage switch's. */
export const INTERNAL_ERROR_BODY = {
  name: 'INTERNAL_SERVER_ERROR',
  message: MESSAGE_BY_STATUS[500],
  debug_id: 'sandbox0outage',
  links: [{ href: 'https://developer.paypal.com/docs/api/orders/v2/#error-INTERNAL_SERVER_ERROR', rel: 'information_link', method: 'GET' }],
};
