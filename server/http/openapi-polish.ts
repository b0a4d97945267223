/**
 * Post-processing of the document @ts-rest/open-api generates from the contract, so that it passes
 * `redocly lint` (redocly.yaml) and reads well in /docs:
 * - zod shapes @anatine/zod-openapi renders loosely (`z.unknown()`, `z.union([obj, z.undefined(), z.null()])`,
 *   nullable titled schemas) become valid OpenAPI 3.0;
 * - every error response gets its description and an example in the error envelope;
 * - every request and success body without an example gets one built from its schema (schema
 *   examples from the contract's `extendApi(..., { example })` are used first);
 * - every response documents X-Request-Id; 429 and 503 document Retry-After.
 */

type Json = Record<string, unknown>;
type Schema = Json;

const ERRORS: Record<string, { code: string; description: string; message: string }> = {
  '400': { code: 'BAD_REQUEST', description: 'Malformed JSON (BAD_REQUEST)', message: 'The body is not valid JSON' },
  '401': { code: 'UNAUTHORIZED', description: 'Missing, unknown or revoked API key (UNAUTHORIZED)', message: 'A valid X-API-Key header is required' },
  '403': { code: 'FORBIDDEN', description: 'The API key lacks the scope this operation needs (FORBIDDEN)', message: 'The API key lacks the payments:write scope' },
  '404': { code: 'NOT_FOUND', description: 'Unknown id, or an id owned by another merchant (NOT_FOUND)', message: 'Not found' },
  '409': { code: 'CONFLICT', description: 'Conflict with the current state (CONFLICT)', message: 'The payment is not in a state that allows this' },
  '413': { code: 'PAYLOAD_TOO_LARGE', description: 'Body larger than 100 KiB (PAYLOAD_TOO_LARGE)', message: 'The body is larger than 100 KiB' },
  '422': { code: 'VALIDATION_ERROR', description: 'Invalid input, with field details (VALIDATION_ERROR)', message: 'The request is invalid' },
  '429': { code: 'RATE_LIMITED', description: 'Too many requests; wait for Retry-After seconds (RATE_LIMITED)', message: 'Too many requests' },
  '500': { code: 'INTERNAL_ERROR', description: 'Unexpected error; quote the request id (INTERNAL_ERROR)', message: 'Something went wrong; quote the request id' },
  '502': { code: 'PROVIDER_ERROR', description: 'The provider was unreachable or refused the request (PROVIDER_ERROR)', message: 'cardpay refused the request: Invalid API Key provided' },
  '503': {
    code: 'SERVICE_UNAVAILABLE',
    description: 'The service has no database capacity free right now; nothing was done, retry after Retry-After seconds with the same Idempotency-Key (SERVICE_UNAVAILABLE)',
    message: 'The service is temporarily overloaded; retry after a moment',
  },
};

const SUCCESS_DESCRIPTIONS: Record<string, string> = { '200': 'OK', '201': 'Created', '202': 'Accepted', '204': 'No content' };

const EXAMPLE_REQUEST_ID = '6f1c1c1e-6c1a-4a57-9a57-1f0c3b9b9b0e';

/** Provider callbacks carry no API key: their 401 is a bad provider signature. */
const CALLBACK_401 = { description: 'Missing or invalid provider signature (UNAUTHORIZED)', message: 'The callback signature is missing or invalid' };

function errorFor(status: string, operation: Json): { code: string; description: string; message: string } | undefined {
  const error = ERRORS[status];
  if (!error) return undefined;
  const isCallback = Array.isArray(operation.security) && operation.security.length === 0;
  if (status === '401' && isCallback) return { ...error, ...CALLBACK_401 };
  const scope = operation['x-required-scope'];
  if (status === '403' && typeof scope === 'string') return { ...error, message: `The API key lacks the ${scope} scope` };
  return error;
}

/** The field a 422 example names: the amount when the body has one, else the first input. */
function exampleField(operation: Json, bodySchema: unknown, components: Record<string, Schema>): { field: string; issue: string } | undefined {
  const resolved = isObject(bodySchema) && typeof bodySchema.$ref === 'string' ? components[bodySchema.$ref.split('/').pop() ?? ''] : bodySchema;
  const first = isObject(resolved) && Array.isArray(resolved.oneOf) ? resolved.oneOf[0] : resolved;
  const member = isObject(first) && typeof first.$ref === 'string' ? components[first.$ref.split('/').pop() ?? ''] : first;
  const bodyFields = isObject(member) && isObject(member.properties) ? Object.keys(member.properties) : [];
  if (bodyFields.includes('amount')) return { field: 'amount', issue: 'must be greater than 0' };
  const query = (Array.isArray(operation.parameters) ? operation.parameters : []).find((p) => isObject(p) && p.in === 'query');
  if (isObject(query) && typeof query.name === 'string') return { field: query.name, issue: 'is invalid' };
  const path = (Array.isArray(operation.parameters) ? operation.parameters : []).find((p) => isObject(p) && p.in === 'path');
  if (isObject(path) && typeof path.name === 'string') return { field: path.name, issue: 'is invalid' };
  return bodyFields[0] ? { field: bodyFields[0], issue: 'is invalid' } : undefined;
}

function errorExample(status: string, error: { code: string; message: string }, detail?: { field: string; issue: string }): Json {
  const details = status === '422' && detail ? { details: [detail] } : {};
  return { success: false, error: { code: error.code, message: error.message, ...details, request_id: EXAMPLE_REQUEST_ID } };
}

/** Plausible values for well-known field names, so built examples read like real responses. */
const FIELD_EXAMPLES: Record<string, unknown> = {
  amount: '25.00',
  amount_refunded: '0.00',
  currency: 'USD',
  provider_ref: 'pi_3Nq8Yx2eZvKYlo2C0a1b2c3d',
  name: 'Acme Ltd',
  url: 'https://shop.example.com/payments/webhook',
  webhook_url: 'https://shop.example.com/payments/webhook',
  failure_reason: null,
  last_error: null,
};

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** z.undefined() renders as `{}` and z.null() as `{ type: 'string', format: 'null', nullable: true }`. */
const isUndefinedSchema = (s: unknown) => isObject(s) && Object.keys(s).length === 0;
const isNullSchema = (s: unknown) => isObject(s) && s.format === 'null';

/**
 * A discriminated union whose members have a title (`extendApi(member, { title })`) but stayed inline
 * (ts-rest only moves titled schemas to components when the body itself is titled): the members
 * become components and the discriminator maps each value to its member.
 */
function hoistDiscriminatedMembers(schema: Schema, components: Record<string, Schema>) {
  const discriminator = schema.discriminator;
  if (!isObject(discriminator) || typeof discriminator.propertyName !== 'string' || !Array.isArray(schema.oneOf)) return;
  const property = discriminator.propertyName;
  const mapping: Record<string, string> = {};
  schema.oneOf = schema.oneOf.map((member) => {
    if (!isObject(member) || typeof member.title !== 'string') return member;
    const existing = components[member.title];
    if (existing && JSON.stringify(existing) !== JSON.stringify(member)) throw new Error(`OpenAPI: two different schemas are titled ${member.title}`);
    components[member.title] = member;
    const ref = `#/components/schemas/${member.title}`;
    const values = isObject(member.properties) && isObject(member.properties[property]) ? member.properties[property].enum : undefined;
    if (Array.isArray(values) && values.length === 1) mapping[String(values[0])] = ref;
    return { $ref: ref };
  });
  if (Object.keys(mapping).length > 0) discriminator.mapping = { ...(isObject(discriminator.mapping) ? discriminator.mapping : {}), ...mapping };
}

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

  hoistDiscriminatedMembers(schema, components);
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
        const hinted = isObject(prop) && !('example' in prop) && name in FIELD_EXAMPLES && (FIELD_EXAMPLES[name] !== null || prop.nullable === true);
        const value = hinted ? FIELD_EXAMPLES[name] : exampleFor(prop, components, depth + 1);
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
          // A made-up value would not match the pattern: such a field needs an example in the contract.
          if (typeof schema.pattern === 'string') return undefined;
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
      const bodyMedia = isObject(body) && isObject(body.content) ? body.content['application/json'] : undefined;
      const detail = exampleField(operation, isObject(bodyMedia) ? bodyMedia.schema : undefined, components);
      for (const [status, response] of Object.entries(isObject(operation.responses) ? operation.responses : {})) {
        if (!isObject(response)) continue;
        const error = errorFor(status, operation);
        if (error) response.description = error.description;
        else if (response.description === status) response.description = SUCCESS_DESCRIPTIONS[status] ?? `HTTP ${status}`;
        response.headers = {
          ...(isObject(response.headers) ? response.headers : {}),
          'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' },
          ...(status === '429' || status === '503' ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : {}),
        };
        for (const media of Object.values(isObject(response.content) ? response.content : {})) {
          if (!isObject(media)) continue;
          if (isObject(media.schema)) normaliseSchema(media.schema, components);
          withExample(media, components, error ? errorExample(status, error, detail) : undefined);
        }
      }
    }
  }
  (document as Json).components = componentsObject;
  return document;
}
