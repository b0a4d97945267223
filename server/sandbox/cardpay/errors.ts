/**
 * Stripe's error shape and HTTP statuses: 400 invalid_request_error / idempotency_error, 401 bad key,
 * 402 card_error, 404 resource_missing. Thrown by handlers, rendered by the router.
 */
export interface StripeErrorBody {
  type: 'api_error' | 'card_error' | 'idempotency_error' | 'invalid_request_error';
  message: string;
  code?: string;
  decline_code?: string;
  param?: string;
  payment_intent?: unknown;
  payment_method?: unknown;
  charge?: string;
  doc_url?: string;
}

export class SimError extends Error {
  constructor(
    readonly status: number,
    readonly body: StripeErrorBody,
  ) {
    super(body.message);
  }
}

const docUrl = (code: string) => `https://docs.stripe.com/error-codes/${code.replace(/_/g, '-')}`;

export function invalidRequest(message: string, param?: string, code?: string): SimError {
  return new SimError(400, {
    type: 'invalid_request_error',
    message,
    ...(code ? { code, doc_url: docUrl(code) } : {}),
    ...(param ? { param } : {}),
  });
}

export function missingParam(param: string): SimError {
  return invalidRequest(`Missing required param: ${param}.`, param, 'parameter_missing');
}

export function unknownParam(param: string): SimError {
  return invalidRequest(`Received unknown parameter: ${param}`, param, 'parameter_unknown');
}

/** An unknown id: 404 when it is the path's resource, 400 when it is a parameter of the request. */
export function noSuch(kind: string, id: string, param = 'id', status = param === 'id' ? 404 : 400): SimError {
  return new SimError(status, {
    type: 'invalid_request_error',
    code: 'resource_missing',
    doc_url: docUrl('resource_missing'),
    message: `No such ${kind}: '${id}'`,
    param,
  });
}

export function unauthorized(message: string, code?: string): SimError {
  return new SimError(401, { type: 'invalid_request_error', message, ...(code ? { code, doc_url: docUrl(code) } : {}) });
}
