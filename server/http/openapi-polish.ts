/**
 * Post-processing of the document @ts-rest/open-api generates from the contract, so that it passes
 * `redocly lint` (redocly.yaml) and reads well in /docs:
 * - zod shapes @anatine/zod-openapi renders loosely (`z.unknown()`, `z.union([obj, z.undefined(), z.null()])`,
 *   nullable titled schemas) become valid OpenAPI 3.0;
 * - every error response gets its description and an example in the error envelope;
 * - every request and success body without an example gets one built from its schema (schema
 *   examples from the contract's `extendApi(..., { example })` are used first);
 * - every response documents X-Request-Id; 429 documents Retry-After.
 */

type Json = Record<string, unknown>;
type Schema = Json;

const ERRORS: Record<string, { code: string; description: string; message: string }> = {
  '400': { code: 'BAD_REQUEST', description: 'Malformed JSON (BAD_REQUEST)', message: 'The body is not valid JSON' },
  '401': { code: 'UNAUTHORIZED', description: 'Missing, unknown or revoked API key (UNAUTHORIZED)', message: 'A valid X-API-Key header is required' },
  '403': { code: 'FORBIDDEN', description: 'The API key lacks the scope this operation needs (FORBIDDEN)', message: 'The API key lacks the payments:write scope' },
  '404': { code: 'NOT_FOUND', description: 'Unknown id, or an id owned by another merchant (NOT_FOUND)', message: 'Payment not found' },
  '409': { code: 'CONFLICT', description: 'Conflict with the current state (CONFLICT)', message: 'The payment is not in a state that allows this' },
  '413': { code: 'PAYLOAD_TOO_LARGE', description: 'Body larger than 100 KiB (PAYLOAD_TOO_LARGE)', message: 'The body is larger than 100 KiB' },
  '422': { code: 'VALIDATION_ERROR', description: 'Invalid input, with field details (VALIDATION_ERROR)', message: 'The request is invalid' },
  '429': { code: 'RATE_LIMITED', description: 'Too many requests; wait for Retry-After seconds (RATE_LIMITED)', message: 'Too many requests' },
  '500': { code: 'INTERNAL_ERROR', description: 'Unexpected error; quote the request id (INTERNAL_ERROR)', message: 'Something went wrong; quote the request id' },
  '502': { code: 'PROVIDER_ERROR', description: 'The provider was unreachable or refused the request (PROVIDER_ERROR)', message: 'cardpay refused the request: Invalid API Key provided' },
};

const SUCCESS_DESCRIPTIONS: Record<string, string> = { '200': 'OK', '201': 'Created', '202': 'Accepted', '204': 'No content' };

const EXAMPLE_REQUEST_ID = '6f1c1c1e-6c1a-4a57-9a57-1f0c3b9b9b0e';

function errorExample(status: string): Json | undefined {
  const error = ERRORS[status];
  if (!error) return undefined;
  const details = status === '422' ? { details: [{ field: 'amount', issue: 'must be greater than 0' }] } : {};
  return { success: false, error: { code: error.code, message: error.message, ...details, request_id: EXAMPLE_REQUEST_ID } };
}

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** z.undefined() renders as `{}` and z.null() as `{ type: 'string', format: 'null', nullable: true }`. */
const isUndefinedSchema = (s: unknown) => isObject(s) && Object.keys(s).length === 0;
const isNullSchema = (s: unknown) => isObject(s) && s.format === 'null';

/** Rewrites the loosely rendered shapes in place (see the file comment). */
function normaliseSchema(schema: Schema, components: Record<string, Schema>): Schema {
  for (const key of ['oneOf', 'anyOf', 'allOf'] as const) {
    const list = schema[key];
    if (Array.isArray(list)) schema[key] = list.map((s) => (isObject(s) ? normaliseSchema(s, components) : s));
  }
  if (isObject(schema.items)) schema.items = normaliseSchema(schema.items, components);
  if (isObject(schema.additionalProperties)) schema.additionalProperties = normaliseSchema(schema.additionalProperties, components);
  if (isObject(schema.properties)) {
    for (const [name, value] of Object.entries(schema.properties)) {
      if (isObject(value)) (schema.properties as Json)[name] = normaliseSchema(value, components);
    }
  }

  // A union with z.undefined()/z.null() members: keep the real members, null becomes `nullable`.
  if (Array.isArray(schema.oneOf) && schema.oneOf.some((s) => isUndefinedSchema(s) || isNullSchema(s))) {
    const hadNull = schema.oneOf.some(isNullSchema);
    const rest = schema.oneOf.filter((s) => !isUndefinedSchema(s) && !isNullSchema(s)) as Schema[];
    delete schema.oneOf;
    if (rest.length === 1) Object.assign(schema, rest[0]);
    else if (rest.length > 1) schema.oneOf = rest;
    if (hadNull) schema.nullable = true;
  }
  // `nullable` needs a `type` beside it. A nullable $ref (allOf of one titled schema) takes the type it refers to.
  if (schema.nullable === true && schema.type === undefined) {
    const ref = Array.isArray(schema.allOf) && isObject(schema.allOf[0]) ? schema.allOf[0].$ref : undefined;
    const target = typeof ref === 'string' ? components[ref.split('/').pop() ?? ''] : undefined;
    if (target && typeof target.type === 'string') schema.type = target.type;
    else if (schema.oneOf === undefined && schema.anyOf === undefined && schema.allOf === undefined) delete schema.nullable; // z.unknown(): any value
  }
  return schema;
}

/** An example value for a schema: its own example, else one built from its parts. */
function exampleFor(schema: unknown, components: Record<string, Schema>, depth = 0): unknown {
  if (!isObject(schema) || depth > 12) return undefined;
  if (typeof schema.$ref === 'string') return exampleFor(components[schema.$ref.split('/').pop() ?? ''], components, depth + 1);
  if ('example' in schema) return schema.example;
  if (Array.isArray(schema.allOf)) {
    const parts = schema.allOf.map((s) => exampleFor(s, components, depth + 1));
    return parts.every(isObject) ? Object.assign({}, ...parts) : parts[0];
  }
  for (const key of ['oneOf', 'anyOf'] as const) {
    const list = schema[key];
    if (Array.isArray(list) && list.length > 0) return exampleFor(list[0], components, depth + 1);
  }
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  if ('default' in schema) return schema.default;
  switch (schema.type) {
    case 'object': {
      const out: Json = {};
      for (const [name, prop] of Object.entries(isObject(schema.properties) ? schema.properties : {})) {
        const value = exampleFor(prop, components, depth + 1);
        if (value !== undefined) out[name] = value;
      }
      return out;
    }
    case 'array': {
      const item = exampleFor(schema.items, components, depth + 1);
      return item === undefined ? [] : [item];
    }
    case 'string':
      switch (schema.format) {
        case 'date-time':
          return '2026-11-22T10:15:30.000Z';
        case 'uuid':
          return '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21';
        case 'uri':
          return 'https://shop.example.com/payments/return';
        case 'email':
          return 'ada@example.com';
        default:
          return typeof schema.minLength === 'number' && schema.minLength > 6 ? 'x'.repeat(schema.minLength) : 'string';
      }
    case 'integer':
    case 'number':
      return typeof schema.minimum === 'number' ? schema.minimum : 1;
    case 'boolean':
      return true;
    default:
      return schema.nullable ? null : undefined;
  }
}

function withExample(media: Json, components: Record<string, Schema>, override?: unknown) {
  if (override !== undefined) {
    media.example = override;
    return;
  }
  if (media.example !== undefined || media.examples !== undefined) return;
  const example = exampleFor(media.schema, components);
  if (example !== undefined) media.example = example;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

export function polishDocument<T extends Json>(document: T): T {
  const componentsObject = (document.components ?? {}) as Json;
  const components = (componentsObject.schemas ?? {}) as Record<string, Schema>;
  for (const schema of Object.values(components)) normaliseSchema(schema, components);

  componentsObject.headers = {
    ...(isObject(componentsObject.headers) ? componentsObject.headers : {}),
    'X-Request-Id': {
      description: 'Identifies the request in the service logs; quote it when asking for support. A well-formed incoming X-Request-Id is kept.',
      schema: { type: 'string', example: EXAMPLE_REQUEST_ID },
    },
    'Retry-After': { description: 'Seconds to wait before trying again.', schema: { type: 'integer', example: 30 } },
  };

  for (const pathItem of Object.values((document.paths ?? {}) as Record<string, Json>)) {
    for (const method of METHODS) {
      const operation = pathItem[method];
      if (!isObject(operation)) continue;
      for (const parameter of Array.isArray(operation.parameters) ? operation.parameters : []) {
        if (isObject(parameter) && isObject(parameter.schema)) normaliseSchema(parameter.schema, components);
      }
      const body = operation.requestBody;
      if (isObject(body) && isObject(body.content)) {
        body.description = typeof operation.summary === 'string' ? `${operation.summary}: request body` : 'Request body';
        for (const media of Object.values(body.content)) {
          if (!isObject(media)) continue;
          if (isObject(media.schema)) normaliseSchema(media.schema, components);
          withExample(media, components);
        }
      }
      for (const [status, response] of Object.entries(isObject(operation.responses) ? operation.responses : {})) {
        if (!isObject(response)) continue;
        const error = ERRORS[status];
        if (error) response.description = error.description;
        else if (response.description === status) response.description = SUCCESS_DESCRIPTIONS[status] ?? `HTTP ${status}`;
        response.headers = {
          ...(isObject(response.headers) ? response.headers : {}),
          'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' },
          ...(status === '429' ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : {}),
        };
        for (const media of Object.values(isObject(response.content) ? response.content : {})) {
          if (!isObject(media)) continue;
          if (isObject(media.schema)) normaliseSchema(media.schema, components);
          withExample(media, components, errorExample(status));
        }
      }
    }
  }
  document.components = componentsObject;
  return document;
}
