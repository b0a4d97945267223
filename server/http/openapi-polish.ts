/**
 * Post-processing of the document @ts-rest/open-api generates from the contract, so that it passes
 * `redocly lint` (redocly.yaml) and reads well in /docs:
 * - zod shapes @anatine/zod-openapi renders loosely (`z.unknown()`, `z.union([obj, z.undefined(), z.null()])`,
 *   nullable titled schemas) become valid OpenAPI 3.0;
 * - every error response gets its description and an example in the error envelope, with the
 *   messages of contract/errors.ts (the ones the runtime sends): the shared table's for the answers every
 *   route gives alike, the route's own (ROUTE_ERROR_EXAMPLES) for a 404 without a path id, 409, 422 and 502;
 *   a route that reads no body, query or header documents no 422;
 * - a request or success body without an example of its own gets one assembled from the examples the
 *   contract declares on its parts (`extendApi(..., { example })`) — never an invented value;
 * - every response documents X-Request-Id; 429 and 503 document Retry-After, as does a route's own error that
 *   sends it (RouteErrorExample.retryAfter); the answers of a rate-limited operation document
 *   X-RateLimit-Limit and -Remaining.
 */

import { CALLBACK_UNVERIFIED, DOCUMENTED_ERRORS, ERROR_MESSAGES, OPEN_REQUESTS_BOUND_429, PROVIDERS, ROUTE_ERROR_EXAMPLES, type DocumentedError, type RouteErrorExample } from '../../contract/index.js';
import { DEFAULT_CALLBACK_LIMIT_PER_MINUTE } from '../config/config.js';

type Json = Record<string, unknown>;
type Schema = Json;

/** Responses outside the error envelope: success, and /readyz's 503. */
const SUCCESS_DESCRIPTIONS: Record<string, string> = { '200': 'OK', '201': 'Created', '202': 'Accepted', '204': 'No content', '503': 'Not ready: a check failed' };

const EXAMPLE_REQUEST_ID = '6f1c1c1e-6c1a-4a57-9a57-1f0c3b9b9b0e';

/** Provider callbacks carry no API key: their 401 is a callback that could not be verified. */
function callback401(path: string): { description: string; message: string } {
  const provider = PROVIDERS.find((p) => path.startsWith(`/v1/webhooks/${p}`));
  return { description: 'The callback could not be verified (UNAUTHORIZED)', message: provider ? CALLBACK_UNVERIFIED[provider] : ERROR_MESSAGES.unauthorized };
}

/** What a 404 on a path says: the resource its id names (most specific prefix first). */
const NOT_FOUND_RESOURCES: [string, string][] = [
  ['/v1/payments/cards/', 'saved card'],
  ['/v1/payments/', 'payment'],
  ['/v1/refunds/', 'refund'],
  ['/v1/webhooks/logs/', 'webhook delivery'],
  ['/v1/events/', 'event'],
];

/** Statuses whose example only the route knows (contract/errors.ts ROUTE_ERROR_EXAMPLES). */
const ROUTE_SPECIFIC = new Set(['409', '422', '502']);

type DocumentedAnswer = DocumentedError & { details?: { field: string; issue: string }[]; retryAfter?: string };

function errorFor(status: string, operation: Json, path: string, method: string): DocumentedAnswer | undefined {
  const error = DOCUMENTED_ERRORS[status];
  if (!error) return undefined;
  const name = `${method.toUpperCase()} ${path}`;
  const own: RouteErrorExample | undefined = ROUTE_ERROR_EXAMPLES[name]?.[status as '404' | '409' | '422' | '502'];
  if (own) {
    return {
      ...error, message: own.message, ...(own.details ? { details: own.details } : {}), ...(own.description ? { description: own.description } : {}), ...(own.retryAfter ? { retryAfter: own.retryAfter } : {}),
    };
  }
  const hasPathId = /\{[a-z_]+\}/.test(path);
  if (ROUTE_SPECIFIC.has(status) || (status === '404' && !hasPathId)) {
    throw new Error(`OpenAPI: ${name} documents ${status} but contract/errors.ts ROUTE_ERROR_EXAMPLES has no message this route sends with it`);
  }
  const resource = NOT_FOUND_RESOURCES.find(([prefix]) => path.startsWith(prefix) && path.includes('{id}'))?.[1];
  if (status === '404' && resource) return { ...error, message: ERROR_MESSAGES.notFound(resource) };
  const isCallback = Array.isArray(operation.security) && operation.security.length === 0;
  if (status === '401' && path === '/metrics') return { ...error, description: 'METRICS_TOKEN is set and the bearer token is missing or wrong (UNAUTHORIZED)', message: ERROR_MESSAGES.metricsToken };
  if (status === '401' && isCallback) return { ...error, ...callback401(path) };
  // Provider callbacks are counted per source address, not per API key.
  if (status === '429' && isCallback) {
    return {
      ...error,
      description: 'Too many callbacks from this address; wait for Retry-After seconds (RATE_LIMITED)',
      message: ERROR_MESSAGES.rateLimited('from this address', `${DEFAULT_CALLBACK_LIMIT_PER_MINUTE} a minute`),
    };
  }
  // Callbacks carry no Idempotency-Key: the generic 503's advice does not apply.
  if (status === '503' && isCallback) {
    return {
      ...error,
      description: 'The service cannot take the callback right now (no database capacity free, or stored secrets it cannot decrypt); send it again after Retry-After seconds (SERVICE_UNAVAILABLE)',
    };
  }
  if (status === '429' && OPEN_REQUESTS_BOUND_429.operations.includes(name)) return { ...error, description: OPEN_REQUESTS_BOUND_429.description };
  const scope = operation['x-required-scope'];
  if (status === '403' && typeof scope === 'string') return { ...error, message: ERROR_MESSAGES.missingScope(scope) };
  return error;
}

/** Whether the route reads anything a 422 could be about: a body, a query or a header (a path id that does not parse is 404). */
function readsInput(operation: Json): boolean {
  const parameters = Array.isArray(operation.parameters) ? operation.parameters : [];
  return operation.requestBody !== undefined || parameters.some((p) => isObject(p) && p.in !== 'path');
}

function errorExample(error: DocumentedAnswer): Json {
  return { success: false, error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}), request_id: EXAMPLE_REQUEST_ID } };
}

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

/**
 * An example for a schema, only from what the contract declares: the schema's own example, else one
 * assembled from its parts' examples (an enum's first value, a default, null for a nullable field).
 * Nothing is made up: a part with no declared example leaves the whole without one, which the
 * openapi tests and redocly's body-has-example rule then report, so the contract gets fixed.
 */
function exampleFor(schema: unknown, components: Record<string, Schema>, depth = 0): unknown {
  if (!isObject(schema) || depth > 12) return undefined;
  if (typeof schema.$ref === 'string') return exampleFor(components[schema.$ref.split('/').pop() ?? ''], components, depth + 1);
  if ('example' in schema) return schema.example;
  if (Array.isArray(schema.allOf)) {
    const parts = schema.allOf.map((s) => exampleFor(s, components, depth + 1));
    if (parts.some((p) => p === undefined)) return undefined;
    return parts.every(isObject) ? Object.assign({}, ...parts) : parts[0];
  }
  for (const key of ['oneOf', 'anyOf'] as const) {
    const list = schema[key];
    if (Array.isArray(list) && list.length > 0) return exampleFor(list[0], components, depth + 1);
  }
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  if ('default' in schema) return schema.default;
  if (schema.type === 'object') {
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const out: Json = {};
    for (const [name, prop] of Object.entries(isObject(schema.properties) ? schema.properties : {})) {
      const value = exampleFor(prop, components, depth + 1);
      if (value !== undefined) out[name] = value;
      else if (required.has(name)) return undefined;
    }
    return out;
  }
  if (schema.type === 'array') {
    const item = exampleFor(schema.items, components, depth + 1);
    return item === undefined ? undefined : [item];
  }
  return schema.nullable === true ? null : undefined;
}

/** Where a body's example is missing: the first path of a required part that declares none. */
export function missingExamplePath(schema: unknown, components: Record<string, Schema>, at = '', depth = 0): string | null {
  if (!isObject(schema) || depth > 12) return null;
  if (typeof schema.$ref === 'string') return missingExamplePath(components[schema.$ref.split('/').pop() ?? ''], components, at, depth + 1);
  if ('example' in schema || (Array.isArray(schema.enum) && schema.enum.length > 0) || 'default' in schema) return null;
  if (Array.isArray(schema.allOf)) {
    for (const s of schema.allOf) {
      const missing = missingExamplePath(s, components, at, depth + 1);
      if (missing) return missing;
    }
    return null;
  }
  for (const key of ['oneOf', 'anyOf'] as const) {
    const list = schema[key];
    if (Array.isArray(list) && list.length > 0) return missingExamplePath(list[0], components, at, depth + 1);
  }
  if (schema.type === 'object') {
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    for (const [name, prop] of Object.entries(isObject(schema.properties) ? schema.properties : {})) {
      if (!required.has(name)) continue;
      const missing = missingExamplePath(prop, components, at ? `${at}.${name}` : name, depth + 1);
      if (missing) return missing;
    }
    return null;
  }
  if (schema.type === 'array') return missingExamplePath(schema.items, components, `${at}[]`, depth + 1);
  return schema.nullable === true ? null : at || '(body)';
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

/**
 * Answers given before a request is counted against its API key's budget: no key, a key without the scope.
 * Everything after is counted and carries the budget's headers — a body too large (413) or malformed (400)
 * too, since the body is read after the key is counted (app.ts). Provider callbacks are counted per
 * source address before anything else: every answer of theirs carries the headers, a 401 included.
 */
const ANSWERED_BEFORE_COUNTING = new Set(['401', '403']);

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
    'X-RateLimit-Limit': {
      description: 'Requests allowed in the current window (per API key; per source address on provider callbacks, and on the 429 of a source address past its failed authentications), on every answer once the request is counted. Sent when rate limiting is on: by default in production, 100 a second per API key, 1,200 a minute per callback source and 60 failed authentications a minute per source (RATE_LIMIT_PER_SECOND / RATE_LIMIT_PER_MINUTE, CALLBACK_RATE_LIMIT_PER_MINUTE, FAILED_AUTH_RATE_LIMIT_PER_MINUTE).',
      schema: { type: 'integer', example: 100 },
    },
    'X-RateLimit-Remaining': {
      description:
        "Requests left in the current window; 0 on the 429 of this budget. POST /v1/webhooks/test and POST /v1/webhooks/logs/{id}/retry have a second 429, the merchant's open webhook requests " +
        '(message "Too many requests to your webhook endpoint: …"): that one is counted like any other request and says what the budget has left. Sent when rate limiting is on.',
      schema: { type: 'integer', example: 99 },
    },
  };

  for (const [path, pathItem] of Object.entries((document.paths ?? {}) as Record<string, Json>)) {
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
      // A route that reads no body, query or header never answers 422 (the shared response list has one for every route).
      if (isObject(operation.responses) && !readsInput(operation)) delete operation.responses['422'];
      // An operation that can answer 429 is counted: every one of its answers carries the budget's headers.
      const rateLimited = isObject(operation.responses) && '429' in operation.responses;
      const isCallback = Array.isArray(operation.security) && operation.security.length === 0;
      for (const [status, response] of Object.entries(isObject(operation.responses) ? operation.responses : {})) {
        if (!isObject(response)) continue;
        // Only responses in the error envelope get the error table's description and example (a 503 /readyz is not one).
        const medias = Object.values(isObject(response.content) ? response.content : {});
        const isEnvelope = medias.some((m) => isObject(m) && isObject(m.schema) && m.schema.$ref === '#/components/schemas/Error');
        const error = isEnvelope ? errorFor(status, operation, path, method) : undefined;
        if (error) response.description = error.description;
        else if (response.description === status) response.description = SUCCESS_DESCRIPTIONS[status] ?? `HTTP ${status}`;
        response.headers = {
          ...(isObject(response.headers) ? response.headers : {}),
          'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' },
          ...(status === '429' || status === '503' ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : {}),
          ...(error?.retryAfter ? { 'Retry-After': { description: error.retryAfter, schema: { type: 'integer', example: 1 } } } : {}),
          ...(rateLimited && (isCallback || !ANSWERED_BEFORE_COUNTING.has(status))
            ? { 'X-RateLimit-Limit': { $ref: '#/components/headers/X-RateLimit-Limit' }, 'X-RateLimit-Remaining': { $ref: '#/components/headers/X-RateLimit-Remaining' } }
            : {}),
        };
        for (const media of Object.values(isObject(response.content) ? response.content : {})) {
          if (!isObject(media)) continue;
          if (isObject(media.schema)) normaliseSchema(media.schema, components);
          withExample(media, components, error ? errorExample(error) : undefined);
        }
      }
    }
  }
  (document as Json).components = componentsObject;
  return document;
}
