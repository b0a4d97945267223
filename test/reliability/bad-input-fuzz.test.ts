import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import type { ZodTypeAny } from 'zod';
import { ERROR_CODES, contract } from '../../contract/index.js';
import { HTTP_STATUS } from '../../server/http/error-map.js';
import { rawRequest, type RawRequest, type RawResponse } from '../support/raw-http.js';
import { findSecretsInFiles, inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';

// ≥ 10,000 malformed or hostile requests, generated from a fixed seed, across every route of the
// contract. Each is built to be refused (bad key, bad id, bad query, bad body, bad headers, lone
// surrogates, bodies that do not match their Content-Encoding or charset, non-ASCII header bytes,
// padded, over-precise or non-monetary amounts), and is sent byte for byte over a raw socket. The
// service must never answer 5xx, every refusal must be the error envelope (with the one status the
// case calls for, where that is certain), and nothing may be written.

const SEED = 20261122;
const RUNS = 10_000;
const CONCURRENCY = 20;
const BODY_LIMIT = 100 * 1024;

type Route = {
  method: string;
  path: string;
  body?: unknown;
  query?: unknown;
  metadata: { scope: string | null };
};

/** Every route of the contract, by `group.name` (the contract is the only list of routes). */
const ROUTES: Record<string, Route> = Object.fromEntries(
  Object.entries(contract).flatMap(([group, routes]) => Object.entries(routes as Record<string, Route>).map(([name, route]) => [`${group}.${name}`, route])),
);

const isZod = (v: unknown): v is ZodTypeAny => typeof (v as { safeParse?: unknown })?.safeParse === 'function';
const UNKNOWN_ID = '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21';

/**
 * A well-formed request per route that the fuzz mutates. The fuzz merchant has no provider
 * credentials and none of these ids exist, so even an unmutated request could not create anything,
 * except where noted: those bodies are only ever sent broken (checked against the route's schema).
 */
const TEMPLATES: Record<string, { params?: Record<string, string>; query?: Record<string, string>; bodies?: unknown[]; headers?: [string, string][] }> = {
  'merchant.get': {},
  'merchant.setWebhook': { bodies: [{ webhook_url: 'https://shop.example.com/hooks' }] },
  // The fuzz merchant registers no URL: a DELETE that gets through removes nothing and writes nothing.
  'merchant.deleteWebhook': {},
  'merchant.storeCredentials': {
    bodies: [
      { provider: 'cardpay', cardpay: { secret_key: 'sk_test_fuzz_0001', webhook_secret: 'whsec_fuzz_0001' } },
      { provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'fuzz-client', client_secret: 'fuzz-secret-0001' } },
      { provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: 'ck', consumer_secret: 'cs-fuzz-0001', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' } },
    ],
  },
  'merchant.listCredentials': {},
  'merchant.deleteCredentials': { params: { provider: 'cardpay' } },
  'payments.createCard': { bodies: [{ payment_method_id: 'pm_card_visa', customer_email: 'buyer@example.com', customer_name: 'Buyer' }] },
  'payments.listCards': { query: { page: '1', page_size: '10' } },
  'payments.deleteCard': { params: { id: UNKNOWN_ID } },
  'payments.checkStatus': { params: { code: 'NLJ7RT61SV' }, bodies: [{}] },
  'payments.reconcile': { bodies: [{ since: '2026-11-20T00:00:00Z', until: '2026-11-21T00:00:00Z' }] },
  'payments.registerPull': { bodies: [{ nominated_number: '254708374149', callback_url: 'https://shop.example.com/pull' }] },
  'payments.create': {
    headers: [['Idempotency-Key', 'fuzz-order-1']],
    bodies: [
      { provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' },
      { provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' },
      { provider: 'walletpay', amount: '25.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' },
    ],
  },
  'payments.list': { query: { status: 'completed', provider: 'cardpay', page_size: '20' } },
  'payments.get': { params: { id: UNKNOWN_ID } },
  'payments.capture': { params: { id: UNKNOWN_ID }, bodies: [{}] },
  'payments.transitions': { params: { id: UNKNOWN_ID } },
  'refunds.create': { bodies: [{ payment_id: UNKNOWN_ID, amount: '5.00' }] },
  'refunds.list': { query: { payment_id: UNKNOWN_ID } },
  'refunds.get': { params: { id: UNKNOWN_ID } },
  'providerCallbacks.cardpay': {
    bodies: [{ id: 'evt_fuzz', object: 'event', type: 'payment_intent.succeeded', data: { object: { object: 'payment_intent', id: 'pi_fuzz', status: 'succeeded', metadata: { payment_id: UNKNOWN_ID } } } }],
  },
  'providerCallbacks.walletpay': { bodies: [{ id: 'WH-FUZZ', event_type: 'PAYMENT.CAPTURE.COMPLETED', resource: { id: 'CAP-FUZZ', status: 'COMPLETED' } }] },
  'providerCallbacks.mobilemoney': {
    bodies: [{ Body: { stkCallback: { MerchantRequestID: 'm-1', CheckoutRequestID: 'ws_CO_fuzz', ResultCode: 0, ResultDesc: 'ok' } } }],
  },
  'providerCallbacks.mobilemoneyStatusResult': { bodies: [{ Result: { ResultType: 0, ResultCode: 0, ConversationID: 'AG_fuzz', OriginatorConversationID: 'o-fuzz' } }] },
  'providerCallbacks.mobilemoneyStatusTimeout': { bodies: [{ Result: { ConversationID: 'AG_fuzz' } }] },
  'providerCallbacks.mobilemoneyReversalResult': { bodies: [{ Result: { ResultType: 0, ResultCode: 0, ConversationID: 'AG_fuzz' } }] },
  'providerCallbacks.mobilemoneyReversalTimeout': { bodies: [{ Result: { ConversationID: 'AG_fuzz' } }] },
  'webhookLogs.list': { query: { status: 'dead', page: '1' } },
  'webhookLogs.get': { params: { id: UNKNOWN_ID } },
  'webhookLogs.retry': { params: { id: UNKNOWN_ID } },
  // The fuzz merchant has no deliveries and no webhook URL: recover and test are 409.
  'webhooks.recover': { bodies: [{ since: '2026-11-20T00:00:00Z', until: '2026-11-21T00:00:00Z' }] },
  'webhooks.test': { bodies: [{}] },
  'events.list': { query: { type: 'payment.completed', page_size: '20' } },
  'events.get': { params: { id: UNKNOWN_ID } },
};

// ---------------------------------------------------------------------------------------------
// Hostile values

const HOSTILE_STRINGS = [
  "' OR '1'='1", "'; DROP TABLE payments; --", '" OR ""="', '1); SELECT pg_sleep(30); --', "' UNION SELECT key_hash FROM api_keys --",
  '$(reboot)', '`id`', '{{7*7}}', '${jndi:ldap://x/a}', '<script>alert(1)</script>', '../../../../etc/passwd', '..\\..\\boot.ini',
  '%00', '\u0000', 'a\u0000b', '\r\nSet-Cookie: evil=1', '%0d%0aSet-Cookie:%20evil=1', '\u202e\u0644\u0627', '\ufeff', '\ud800', '\udfff',
  '😀', '👩‍👩‍👧‍👦', 'Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇', 'null', 'undefined', 'NaN', 'Infinity', '-Infinity', '-1', '0', '1e309', '0x10', '１２３', '٣٤', 'true', '[]', '{}',
  ' ', '\t', '', '__proto__', 'constructor', '2026-01-01T00:00:00+99:99', '0000-01-01T00:00:00Z', '2026-13-01T00:00:00Z', '9999-12-31T23:59:60Z', '00000000-0000-0000-0000-000000000000', '{0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21}',
  '0b8f6c1e2f3d4c8a9d556f1e8f3a7c21', '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c2', 'pk_live_0000000000000000', 'whsec_', '\\', '"', "'", '\\u0000',
];
const BAD_AMOUNTS: unknown[] = [
  -1, -0.01, 0, '0', '0.00', '-5', 'NaN', 'Infinity', '1e309', 1e308, '99999999999999999999999', '1.005', '1,00', ' 1', '+1', '0x1A', '١٠',
  '', 'abc', 'null', true, [], {}, null, '1.2.3', '--1', '1e-7', 0.1 + 0.2, 2 ** 64, -(2 ** 53),
];
/** JSON number literals JSON.parse reads as something odd (Infinity, huge, negative zero). */
const RAW_AMOUNTS = ['1e400', '-1e400', '-0', '1.00000000000000000000001', '123456789012345678901234567890', '0.0000001', '1E2'];

const hostileString = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.integer({ min: 257, max: 6000 }).map((n) => 'x'.repeat(n)) },
);
const wrongType = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
  fc.constant({ $gt: '' }),
);
const badValue = fc.oneof(hostileString, wrongType, fc.constantFrom(...BAD_AMOUNTS));
const hostileKey = fc.oneof(fc.constantFrom('foo', '__proto__', 'constructor', 'prototype', '', ' ', '$where', 'amount ', 'AMOUNT', '😀', 'a'.repeat(300)), fc.string({ maxLength: 12 }));
const BAD_PATH_SEGMENTS = ['%', '%zz', '%E0%A4%A', '%00', '%2e%2e%2f%2e%2e%2fetc%2fpasswd', '..', '.', '%2F', '%C0%AF', '%FF%FE', 'a'.repeat(6000), '%uFFFF', ';', '%3Bselect'];
// Never empty: `/v1/webhooks/logs/` would be the list route, a valid request.
const pathSegment = fc.oneof(fc.uuid(), fc.constantFrom(...BAD_PATH_SEGMENTS), hostileString.map((s) => pct(s).slice(0, 6000) || '%20'));
const INVALID_JSON = [
  '{', '{"a":', '{"a":1,}', "{'a':1}", '{"a":NaN}', '{"a":undefined}', '{"a":1}//', '/* c */{}', '\ufeff{}', '{"a":"\\x41"}', '{"a":"\u0000"}',
  '[', ']', 'nul', 'tru', '01', '{"a":1}{"b":2}', '{"a" 1}', '\u0000', '"unterminated', '{"a":"\\ud800"', '{"amount":1e400',
];
const WRONG_CONTENT_TYPES = [
  'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'application/json-patch', 'text/json', '',
  'application/octet-stream', '*/*', 'application/json; charset=utf-7', 'application/json; charset=utf-16', 'application/json; charset=klingon',
];
const HEADER_INJECTIONS = [
  'x\r\nSet-Cookie: evil=1', 'x\r\nX-API-Key: pk_test_injected', 'x%0d%0aLocation:%20https://evil.example', 'x\tSet-Cookie: a=b', '\u00ff\u00fe', 'é😀',
  "' OR 1=1 --", 'a'.repeat(4000),
];

/** A lone UTF-16 surrogate: legal as a JSON escape, refused by PostgreSQL text and jsonb. */
const loneSurrogate = fc.oneof(fc.integer({ min: 0xd800, max: 0xdbff }), fc.integer({ min: 0xdc00, max: 0xdfff })).map((c) => String.fromCharCode(c));
/** A header value with characters outside printable ASCII (sent as UTF-8 bytes), never control characters. */
const nonAsciiHeader = fc
  .oneof(
    fc.constantFrom('ключ-🔑', 'order-é', '\u00ff\u00fe', '注文-1042', 'x\u00a0y', '😀'),
    fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }),
  )
  .map((v) => v.replace(/[\u0000-\u001f\u007f]/g, '').replace(/[\ud800-\udfff](?![\udc00-\udfff])/g, ''))
  .filter((v) => /[^\x20-\x7e]/.test(v) && !/^[\s\u0080-\u00a0]|[\s\u0080-\u00a0]$/.test(v));

type AmountCase = { kind: 'padded' | 'precise' | 'currency'; json: string; text: string; currency: string };
const PADDING = [' ', '  ', '\t', '\n', '\u00a0', '\u2003', '\u3000', '\ufeff'];
const NON_MONETARY = ['XXX', 'XAU', 'XAG', 'XPT', 'XPD', 'XTS', 'XDR', 'XBA', 'XBB', 'XBC', 'XBD', 'XSU', 'XUA', 'USN', 'CLF', 'xau'];
/**
 * Amounts a strict reader must refuse: a valid decimal with padding (as a string), or more decimals
 * than the currency has (a JSON number or string, often beyond what a double holds), or a valid
 * amount in a non-monetary currency.
 */
const amountCase: fc.Arbitrary<AmountCase> = fc.oneof(
  fc.tuple(fc.integer({ min: 1, max: 99_999 }), fc.constantFrom(...PADDING), fc.constantFrom(...PADDING), fc.nat(2)).map(([n, a, b, where]) => {
    const text = [`${a}${n}`, `${n}${b}`, `${a}${n}.50${b}`][where]!;
    return { kind: 'padded' as const, json: JSON.stringify(text), text, currency: 'USD' };
  }),
  fc
    .tuple(fc.integer({ min: 0, max: 99_999_999 }), fc.integer({ min: 3, max: 25 }), fc.nat(), fc.constantFrom('USD', 'EUR', 'KES', 'JPY', 'KWD'), fc.boolean())
    .map(([whole, places, seed, currency, asString]) => {
      // One more decimal place than the currency has, at least; the last digit is never 0.
      const digits = { USD: 2, EUR: 2, KES: 2, JPY: 0, KWD: 3 }[currency]!;
      const count = Math.max(places, digits + 1);
      let fraction = '';
      for (let i = 0, x = seed; i < count; i += 1, x = Math.floor(x / 7) + i * 31) fraction += String(x % 10);
      fraction = `${fraction.slice(0, -1)}${1 + (seed % 9)}`;
      const text = `${whole}.${fraction}`;
      return { kind: 'precise' as const, json: asString ? JSON.stringify(text) : text, text, currency };
    }),
  fc.tuple(fc.constantFrom(...NON_MONETARY), fc.integer({ min: 1, max: 9999 })).map(([currency, n]) => ({ kind: 'currency' as const, json: JSON.stringify(String(n)), text: String(n), currency })),
);
/** Bodies whose bytes do not match what their headers claim. */
const ENCODING_CASES = ['gzip', 'deflate', 'br', 'x-evil', 'gzip, gzip', 'truncated-gzip', 'charset', 'bad-utf8'] as const;
const BAD_CHARSETS = ['latin1', 'utf-16', 'utf-16le', 'iso-8859-1', 'klingon', 'utf-7', 'ascii', 'windows-1252'];

// ---------------------------------------------------------------------------------------------
// Building requests

interface Sample {
  route: string;
  facet: number;
  pick: number;
  value: unknown;
  value2: unknown;
  key: string;
  segment: string;
  size: number;
  extraHeader: number | null;
  headerValue: string;
  lone: string;
  bytes: Uint8Array;
  nonAscii: string;
  amount: AmountCase;
}

interface FuzzCase {
  route: string;
  facet: string;
  request: RawRequest;
  /** The one status this case must get, where the refusal is certain (a lone surrogate is always 422). */
  expectStatus?: number;
}

const sampleArb: fc.Arbitrary<Sample> = fc.record({
  route: fc.constantFrom(...Object.keys(ROUTES)),
  facet: fc.nat(),
  pick: fc.nat(),
  value: badValue,
  value2: badValue,
  key: hostileKey,
  segment: pathSegment,
  size: fc.integer({ min: 1, max: 1_000_000 }),
  extraHeader: fc.option(fc.nat(), { freq: 3 }),
  headerValue: fc.oneof(fc.constantFrom(...HEADER_INJECTIONS), hostileString),
  lone: loneSurrogate,
  bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }),
  nonAscii: nonAsciiHeader,
  amount: amountCase,
});

/** Text of any generated value (generated objects may have keys like toString, so no String()). */
function asText(v: unknown): string {
  return typeof v === 'string' ? v : (JSON.stringify(v) ?? 'null');
}

function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** The (possibly nested) object paths of a template body, e.g. ['cardpay','secret_key']. */
function fieldPaths(body: unknown, prefix: string[] = []): string[][] {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return [];
  return Object.entries(body).flatMap(([k, v]) => [[...prefix, k], ...fieldPaths(v, [...prefix, k])]);
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown, remove = false) {
  let node = target;
  for (const k of path.slice(0, -1)) node = node[k] as Record<string, unknown>;
  if (remove) delete node[path.at(-1)!];
  else node[path.at(-1)!] = value;
}

/** Header values may not carry CR, LF or NUL unless the case is about exactly that (and stays well-formed). */
function headerSafe(value: string): string {
  if (/^x\r\n[A-Za-z-]+: [ -~]+$/.test(value)) return value;
  return value.replace(/[\u0000-\u0008\u000a-\u001f\u007f]/g, '').replace(/[\ud800-\udfff]/g, '');
}

function targetOf(route: Route, params: Record<string, string>, query?: string): string {
  const path = route.path.replace(/:([A-Za-z]+)/g, (_, name: string) => params[name] ?? UNKNOWN_ID);
  return query ? `${path}?${query}` : path;
}

/** Percent-encodes the UTF-8 bytes (a lone surrogate becomes U+FFFD instead of throwing). */
function pct(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const ch = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-_.~]/.test(ch) ? ch : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function encodeQuery(entries: [string, string][]): string {
  return entries.map(([k, v]) => `${pct(k)}=${pct(v)}`).join('&');
}

/** True when `text` is JSON the route's body schema accepts (such a case is not a bad request). */
function bodyAccepted(route: Route, text: string | undefined): boolean {
  if (!isZod(route.body)) return false;
  let parsed: unknown;
  try {
    parsed = text === undefined ? undefined : JSON.parse(text);
  } catch {
    return false;
  }
  return route.body.safeParse(parsed).success;
}

/** Routes that take an amount (body `amount`, or the list's min/max filters). */
const AMOUNT_ROUTES = new Set(['payments.create', 'refunds.create', 'payments.list']);

/** Routes whose unmutated requests would still be refused (no credentials, unknown ids) — see TEMPLATES. */
const WRITES_IF_VALID = new Set(['merchant.setWebhook', 'merchant.storeCredentials', 'webhooks.recover', 'webhooks.test']);

/**
 * Routes that take no body (c.noBody(): one sent is ignored) and whose unmutated request succeeds: a DELETE of
 * the webhook when none is registered is 200 and writes nothing. A body facet changes nothing of such a
 * request, so it would only be accepted: they get the other facets.
 */
const BODYLESS_ACCEPTED = new Set(['merchant.deleteWebhook']);

function buildCase(s: Sample, apiKey: string): FuzzCase | null {
  const route = ROUTES[s.route]!;
  const template = TEMPLATES[s.route]!;
  const scoped = route.metadata.scope !== null;
  const bodies = template.bodies ?? [];
  const baseBody = bodies.length > 0 ? clone(bodies[s.pick % bodies.length]) : undefined;
  const params = { ...(template.params ?? {}) };
  const queryEntries: [string, string][] = Object.entries(template.query ?? {});
  const headers: [string, string][] = [['X-API-Key', apiKey], ...(template.headers ?? [])];
  let bodyText: string | undefined = baseBody === undefined ? undefined : JSON.stringify(baseBody);
  let contentType: string | null = bodyText === undefined ? null : 'application/json';

  const facets = [
    ...(scoped ? ['auth'] : []),
    ...(Object.keys(params).length > 0 ? ['path'] : []),
    ...(isZod(route.query) ? ['query'] : []),
    ...(route.body !== undefined && !BODYLESS_ACCEPTED.has(s.route) ? ['body-field', 'body-shape', 'body-raw', 'body-type', 'body-size', 'body-dup', 'body-extra', 'body-surrogate', 'body-encoding'] : []),
    ...(AMOUNT_ROUTES.has(s.route) ? ['amount'] : []),
    'header-nonascii',
    'method',
  ];
  const facet = facets[s.facet % facets.length]!;

  switch (facet) {
    case 'auth': {
      const variants = [null, '', asText(s.value).slice(0, 200), `${apiKey}x`, apiKey.slice(0, -1), apiKey.toUpperCase(), `Bearer ${apiKey}`, headerSafe(s.headerValue), 'pk_'.padEnd(8000, 'A')];
      const v = variants[s.pick % variants.length] ?? null;
      headers.splice(0, 1, ...(v === null ? [] : [['X-API-Key', headerSafe(v)] as [string, string]]));
      if (v !== null && headerSafe(v) === apiKey) return null;
      break;
    }
    case 'path': {
      const name = Object.keys(params)[s.pick % Object.keys(params).length]!;
      params[name] = s.segment;
      break;
    }
    case 'query': {
      const known = Object.keys((route.query as { shape?: Record<string, unknown> }).shape ?? {});
      const mode = s.pick % 4;
      const field = known[s.size % Math.max(known.length, 1)] ?? 'page';
      // The query parser drops keys like __proto__ or constructor (prototype pollution guard): use another.
      if (mode === 0) queryEntries.push([s.key === '' || s.key in Object.prototype ? 'unknown' : s.key, asText(s.value)]);
      else if (mode === 1) queryEntries.push([`${field}[]`, 'a'], [`${field}[]`, 'b']);
      else if (mode === 2) queryEntries.push([`${field}[$gt]`, '']);
      else {
        const filtered = queryEntries.filter(([k]) => k !== field);
        const candidate: [string, string][] = [...filtered, [field, asText(s.value)]];
        const parsed = (route.query as ZodTypeAny).safeParse(Object.fromEntries(candidate));
        if (parsed.success) return null;
        queryEntries.splice(0, queryEntries.length, ...candidate);
      }
      break;
    }
    case 'body-field': {
      if (baseBody === undefined || typeof baseBody !== 'object') return null;
      const paths = fieldPaths(baseBody);
      if (paths.length === 0) return null;
      const path = paths[s.pick % paths.length]!;
      const body = clone(baseBody) as Record<string, unknown>;
      const mode = s.size % 3;
      if (mode === 0) setPath(body, path, s.value);
      else if (mode === 1) setPath(body, path, undefined, true);
      else {
        // A raw JSON number literal in place of the field (JSON.parse turns some into Infinity or huge values).
        setPath(body, path, '__RAW__');
        bodyText = JSON.stringify(body).replace('"__RAW__"', RAW_AMOUNTS[s.pick % RAW_AMOUNTS.length]!);
        break;
      }
      bodyText = JSON.stringify(body);
      break;
    }
    case 'body-shape': {
      const shapes = [[baseBody], [], 'body', 42, null, true, [[[]]], { data: baseBody }];
      bodyText = JSON.stringify(shapes[s.pick % shapes.length]);
      break;
    }
    case 'body-raw':
      bodyText = INVALID_JSON[s.pick % INVALID_JSON.length]!;
      break;
    case 'body-type': {
      contentType = WRONG_CONTENT_TYPES[s.pick % WRONG_CONTENT_TYPES.length]!;
      if (contentType === '') contentType = null;
      bodyText = s.size % 2 === 0 ? (bodyText ?? '{}') : 'webhook_url=https%3A%2F%2Fevil.example&provider=cardpay';
      break;
    }
    case 'body-size': {
      // Just under the 100 KiB limit (a field far too long) or just over it (413).
      const over = s.pick % 2 === 0;
      const target = over ? BODY_LIMIT + 1 + (s.size % (60 * 1024)) : BODY_LIMIT - 512 - (s.size % (40 * 1024));
      const body = (baseBody && typeof baseBody === 'object' && !Array.isArray(baseBody) ? clone(baseBody) : {}) as Record<string, unknown>;
      const paths = fieldPaths(body);
      const path = paths.length > 0 ? paths[s.pick % paths.length]! : ['padding'];
      setPath(body, path, '');
      const padding = target - Buffer.byteLength(JSON.stringify(body));
      setPath(body, path, (s.pick % 3 === 0 ? '😀' : 'A').repeat(Math.max(1, s.pick % 3 === 0 ? Math.floor(padding / 4) : padding)));
      if (s.size % 5 === 0) {
        // Deep nesting instead of one long string.
        const depth = Math.min(Math.floor(padding / 2), 40_000);
        bodyText = `{"nested":${'['.repeat(depth)}${']'.repeat(depth)}}`;
      } else bodyText = JSON.stringify(body);
      break;
    }
    case 'body-dup': {
      if (!baseBody || typeof baseBody !== 'object' || Array.isArray(baseBody)) return null;
      const keys = Object.keys(baseBody);
      const key = keys[s.pick % keys.length]!;
      bodyText = `${JSON.stringify(baseBody).slice(0, -1)},${JSON.stringify(key)}:${JSON.stringify(s.value) ?? 'null'}}`;
      break;
    }
    case 'body-extra': {
      if (!baseBody || typeof baseBody !== 'object' || Array.isArray(baseBody)) return null;
      bodyText = `${JSON.stringify(baseBody).slice(0, -1)}${Object.keys(baseBody).length > 0 ? ',' : ''}${JSON.stringify(s.key)}:${JSON.stringify(s.value) ?? 'null'}}`;
      break;
    }
    case 'body-surrogate': {
      // A lone surrogate in a string field, or in a key: always 422 on a route that reads a body; one that
      // takes none (c.noBody()) ignores it (server/http/middleware/reject-nul.ts), then refuses as it would anyway.
      const body = (baseBody && typeof baseBody === 'object' && !Array.isArray(baseBody) ? clone(baseBody) : {}) as Record<string, unknown>;
      const strings = fieldPaths(body).filter((p) => typeof p.reduce<unknown>((node, k) => (node as Record<string, unknown>)[k], body) === 'string');
      if (strings.length === 0 || s.size % 5 === 0) body[`k${s.lone}`] = 1;
      else {
        const path = strings[s.pick % strings.length]!;
        const value = path.reduce<unknown>((node, k) => (node as Record<string, unknown>)[k], body) as string;
        const at = s.size % (value.length + 1);
        setPath(body, path, `${value.slice(0, at)}${s.lone}${value.slice(at)}`);
      }
      // JSON.stringify writes a lone surrogate as its \\u escape: the bytes on the wire are valid UTF-8.
      bodyText = JSON.stringify(body);
      const expectStatus = isZod(route.body) ? { expectStatus: 422 } : {};
      return { route: s.route, facet, ...expectStatus, request: { method: route.method, target: targetOf(route, params), headers: [...headers, ['Content-Type', 'application/json']], body: bodyText } };
    }
    case 'body-encoding': {
      // Bytes that do not match their Content-Encoding or charset: 400 before anything else runs.
      const kind = ENCODING_CASES[s.pick % ENCODING_CASES.length]!;
      const text = bodyText ?? '{}';
      const garbage = Buffer.from(s.bytes);
      let body: Buffer = garbage;
      let type = 'application/json';
      const extra: [string, string][] = [];
      if (kind === 'truncated-gzip') {
        body = gzipSync(text).subarray(0, 10 + (s.size % 8));
        extra.push(['Content-Encoding', 'gzip']);
      } else if (kind === 'charset') {
        body = Buffer.from(text);
        type = `application/json; charset=${BAD_CHARSETS[s.size % BAD_CHARSETS.length]}`;
      } else if (kind === 'bad-utf8') {
        const at = Math.max(1, s.size % Math.max(text.length, 1));
        body = Buffer.concat([Buffer.from(text.slice(0, at)), Buffer.from([[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0x80]][s.size % 5]!), Buffer.from(text.slice(at))]);
      } else {
        // Garbage in a format zlib checks (gzip: magic bytes; deflate: header and checksum) or one not supported.
        if (kind === 'gzip' && garbage[0] === 0x1f) garbage[0] = 0;
        if (kind === 'deflate') body = Buffer.concat([Buffer.from([0x78, 0x9c]), garbage.subarray(0, 8), Buffer.from([0, 0, 0, 0])]);
        extra.push(['Content-Encoding', kind]);
      }
      return { route: s.route, facet, expectStatus: 400, request: { method: route.method, target: targetOf(route, params), headers: [...headers, ...extra, ['Content-Type', type]], body } };
    }
    case 'header-nonascii': {
      // Non-ASCII header bytes: a non-ASCII Idempotency-Key is 422, a non-ASCII API key 401.
      const request = (hs: [string, string][]): RawRequest => ({
        method: route.method, target: targetOf(route, params, encodeQuery(queryEntries)), headers: bodyText === undefined ? hs : [...hs, ['Content-Type', 'application/json']], body: bodyText,
      });
      if (s.route === 'payments.create' && s.pick % 2 === 0) {
        const hs = headers.map(([n, v]): [string, string] => (n === 'Idempotency-Key' ? [n, `${v}-${s.nonAscii}`] : [n, v]));
        return { route: s.route, facet, expectStatus: 422, request: request(hs) };
      }
      if (scoped) {
        const hs = headers.map(([n, v]): [string, string] => (n === 'X-API-Key' ? [n, s.pick % 3 === 0 ? s.nonAscii : `${v}${s.nonAscii}`] : [n, v]));
        return { route: s.route, facet, expectStatus: 401, request: request(hs) };
      }
      const name = ['Cardpay-Signature', 'Walletpay-Transmission-Id', 'Walletpay-Transmission-Sig', 'X-Mobilemoney-Signature', 'Idempotency-Key'][s.pick % 5]!;
      return { route: s.route, facet, request: request([...headers, [name, s.nonAscii]]) };
    }
    case 'amount': {
      // Padded, over-precise or non-monetary amounts: 422, never trimmed, rounded or charged.
      const a = s.amount;
      if (s.route === 'payments.list') {
        if (a.kind === 'currency') return null;
        const field = s.pick % 2 === 0 ? 'min_amount' : 'max_amount';
        const entries: [string, string][] = [[field, a.text], ...(a.kind === 'precise' ? [['currency', a.currency] as [string, string]] : [])];
        return { route: s.route, facet, expectStatus: 422, request: { method: 'GET', target: targetOf(route, params, encodeQuery(entries)), headers } };
      }
      const body = clone(baseBody) as Record<string, unknown>;
      const payment = s.route === 'payments.create';
      if (payment) body.currency = a.currency;
      if (payment && body.provider === 'mobilemoney' && a.kind === 'padded') body.currency = 'KES';
      body.amount = '__AMOUNT__';
      bodyText = JSON.stringify(body).replace('"__AMOUNT__"', a.json);
      // A refund of an unknown payment is 404 before its amount is read; the refusal is all that is certain.
      return { route: s.route, facet, ...(payment ? { expectStatus: 422 } : {}), request: { method: route.method, target: targetOf(route, params), headers: [...headers, ['Content-Type', 'application/json']], body: bodyText } };
    }
    case 'method': {
      // Only methods no route serves on this path (GET on POST /v1/payments would be a valid list).
      const served = new Set(Object.values(ROUTES).filter((r) => r.path === route.path).map((r) => r.method));
      const methods = ['PATCH', 'PUT', 'DELETE', 'POST', 'GET', 'OPTIONS', 'TRACE'].filter((m) => !served.has(m));
      return {
        route: s.route,
        facet,
        request: { method: methods[s.pick % methods.length]!, target: targetOf(route, params), headers, body: undefined },
      };
    }
  }

  // A body facet that left a body the route's schema accepts is not a bad request: skip it where
  // such a request could write (see WRITES_IF_VALID), and for every other route to keep the cases hostile.
  if (facet.startsWith('body-') && facet !== 'body-type' && facet !== 'body-size' && route.metadata.scope !== null && bodyAccepted(route, bodyText)) return null;
  if (facet === 'body-type' && WRITES_IF_VALID.has(s.route) && contentType?.startsWith('application/json')) return null;

  if (s.extraHeader !== null) {
    const names = ['X-Request-Id', 'Idempotency-Key', 'Accept', 'Content-Encoding', 'Accept-Encoding', 'X-Forwarded-For', 'User-Agent', 'Cardpay-Signature', 'Walletpay-Transmission-Sig', 'X-Mobilemoney-Signature'];
    const name = names[s.extraHeader % names.length]!;
    const value = name === 'Content-Encoding' ? ['gzip', 'deflate', 'br', 'identity, gzip', 'x-evil'][s.extraHeader % 5]! : headerSafe(s.headerValue);
    const i = headers.findIndex(([n]) => n.toLowerCase() === name.toLowerCase());
    if (i >= 0) headers.splice(i, 1, [name, value]);
    else headers.push([name, value]);
  }
  if (contentType !== null && bodyText !== undefined) headers.push(['Content-Type', headerSafe(contentType)]);
  return {
    route: s.route,
    facet,
    request: { method: route.method, target: targetOf(route, params, encodeQuery(queryEntries)), headers, body: bodyText },
  };
}

/**
 * Requests that once made the service answer 500, kept as a fixed corpus beside the generated ones:
 * a NUL character (legal as `\u0000` in JSON and `%00` in a query, refused by PostgreSQL), instants
 * that match the date-time format but do not exist, and path parameters that cannot be percent-decoded.
 */
function corpus(apiKey: string): FuzzCase[] {
  const auth: [string, string] = ['X-API-Key', apiKey];
  const json: [string, string] = ['Content-Type', 'application/json'];
  const get = (route: string, target: string): FuzzCase => ({ route, facet: 'corpus', request: { method: 'GET', target, headers: [auth] } });
  const send = (route: string, method: string, target: string, body: string, extra: [string, string][] = []): FuzzCase => ({
    route, facet: 'corpus', request: { method, target, headers: [auth, json, ...extra], body },
  });
  const exactly = (status: number, c: FuzzCase): FuzzCase => ({ ...c, expectStatus: status });
  const nulEvent = '{"id":"evt_\\u0000","object":"event","type":"payment_intent.succeeded","data":{"object":{"object":"payment_intent","id":"pi_\\u0000","status":"succeeded","metadata":{"payment_id":"x\\u0000"}}}}';
  return [
    get('payments.list', '/v1/payments?search=%00'),
    get('payments.list', '/v1/payments?search=a%00b&status=completed'),
    get('payments.list', '/v1/payments?since=2026-01-01T00:00:00%2B99:99'),
    get('payments.list', '/v1/payments?until=0000-01-01T00:00:00Z'),
    get('webhookLogs.list', '/v1/webhooks/logs?payment_id=%00'),
    get('refunds.list', `/v1/refunds?payment_id=${UNKNOWN_ID}&page=%00`),
    get('payments.get', '/v1/payments/%zz'),
    get('refunds.get', '/v1/refunds/%'),
    get('webhookLogs.get', '/v1/webhooks/logs/%C0%AF'),
    { route: 'payments.deleteCard', facet: 'corpus', request: { method: 'DELETE', target: '/v1/payments/cards/%E0%A4%A', headers: [auth] } },
    { route: 'webhookLogs.retry', facet: 'corpus', request: { method: 'POST', target: '/v1/webhooks/logs/%uFFFF/retry', headers: [auth] } },
    send('payments.reconcile', 'POST', '/v1/payments/mobilemoney/reconcile', '{"since":"2026-01-01T00:00:00+99:99"}'),
    send('payments.reconcile', 'POST', '/v1/payments/mobilemoney/reconcile', '{"until":"0000-01-01T00:00:00Z"}'),
    send('payments.create', 'POST', '/v1/payments', '{"provider":"cardpay","amount":"1.00","currency":"USD","payment_method":"pm_\\u0000"}', [['Idempotency-Key', 'corpus-nul']]),
    send('merchant.setWebhook', 'PUT', '/v1/merchant/webhook', '{"webhook_url":"https://shop.example.com/\\u0000"}'),
    send('merchant.storeCredentials', 'PUT', '/v1/merchant/credentials', '{"provider":"cardpay","cardpay":{"secret_key":"sk_test_\\u0000"}}'),
    send('payments.createCard', 'POST', '/v1/payments/cards', '{"payment_method_id":"pm_\\u0000"}'),
    send('refunds.create', 'POST', '/v1/refunds', `{"payment_id":"${UNKNOWN_ID}","amount":"1.00","\\u0000":1}`),
    send('providerCallbacks.cardpay', 'POST', '/v1/webhooks/cardpay', nulEvent, [['Cardpay-Signature', 't=1,v1=00']]),
    send('providerCallbacks.walletpay', 'POST', '/v1/webhooks/walletpay', '{"id":"WH-\\u0000","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"CAP-\\u0000","status":"COMPLETED"}}', [['Walletpay-Transmission-Id', 'x']]),
    send('providerCallbacks.mobilemoney', 'POST', '/v1/webhooks/mobilemoney?ref=%00&token=%00', '{"Body":{"stkCallback":{"CheckoutRequestID":"ws_\\u0000","ResultCode":0}}}'),
    // The red-team findings of issue 14, each once: the exact status is part of the promise.
    exactly(422, send('payments.create', 'POST', '/v1/payments', '{"provider":"cardpay","amount":"1.00","currency":"USD","payment_method":"pm_\\ud800"}', [['Idempotency-Key', 'corpus-surrogate']])),
    exactly(422, send('payments.create', 'POST', '/v1/payments', '{"provider":"mobilemoney","amount":"100","currency":"KES","phone":"254708374149\\udc00"}', [['Idempotency-Key', 'corpus-surrogate-2']])),
    exactly(400, send('merchant.setWebhook', 'PUT', '/v1/merchant/webhook', '{"webhook_url":"https://shop.example.com/x"}', [['Content-Encoding', 'gzip']])),
    exactly(422, send('payments.create', 'POST', '/v1/payments', '{"provider":"cardpay","amount":"1.00","currency":"USD","payment_method":"pm_card_visa"}', [['Idempotency-Key', 'ключ-🔑']])),
    exactly(422, send('payments.create', 'POST', '/v1/payments', '{"provider":"cardpay","amount":"  5 ","currency":"USD","payment_method":"pm_card_visa"}', [['Idempotency-Key', 'corpus-padded']])),
    exactly(422, send('payments.create', 'POST', '/v1/payments', '{"provider":"cardpay","amount":"5","currency":"XAU","payment_method":"pm_card_visa"}', [['Idempotency-Key', 'corpus-gold']])),
    exactly(422, send('payments.create', 'POST', '/v1/payments', '{"provider":"cardpay","amount":19.999999999999999,"currency":"USD","payment_method":"pm_card_visa"}', [['Idempotency-Key', 'corpus-precise']])),
    exactly(422, get('payments.list', '/v1/payments?currency=USD&min_amount=19.999')),
  ];
}

// ---------------------------------------------------------------------------------------------
// Checking answers

function problemWith(c: FuzzCase, res: RawResponse): string | null {
  if (res.status >= 500) return `${res.status} server error: ${res.body.slice(0, 300)}`;
  if (c.expectStatus !== undefined && res.status !== c.expectStatus) return `expected ${c.expectStatus}, got ${res.status}: ${res.body.slice(0, 200)}`;
  if (res.headers['set-cookie'] !== undefined) return 'a Set-Cookie header came back';
  const requestId = res.headers['x-request-id'];
  if (!requestId || !/^[A-Za-z0-9._:-]{1,128}$/.test(requestId)) return `bad X-Request-Id ${JSON.stringify(requestId)}`;
  if (res.status >= 200 && res.status < 300) {
    // Provider callbacks acknowledge what they cannot use (unknown references); merchant routes must refuse.
    return ROUTES[c.route]!.metadata.scope === null ? null : `accepted with ${res.status}: ${res.body.slice(0, 200)}`;
  }
  let body: { success?: unknown; error?: { code?: unknown; message?: unknown; request_id?: unknown } };
  try {
    body = JSON.parse(res.body) as typeof body;
  } catch {
    return `non-JSON ${res.status} body: ${res.body.slice(0, 200)}`;
  }
  const e = body.error;
  if (body.success !== false || !e || typeof e.message !== 'string' || typeof e.request_id !== 'string') return `not the error envelope: ${res.body.slice(0, 200)}`;
  if (!(ERROR_CODES as readonly unknown[]).includes(e.code)) return `unknown error code ${String(e.code)}`;
  if (HTTP_STATUS[e.code as keyof typeof HTTP_STATUS] !== res.status) return `${res.status} does not match code ${String(e.code)}`;
  if (e.request_id !== requestId) return 'error.request_id differs from X-Request-Id';
  return null;
}

function describeCase(c: FuzzCase): string {
  const body = c.request.body === undefined ? '' : String(c.request.body);
  return `${c.route} [${c.facet}] ${c.request.method} ${c.request.target.slice(0, 200)} headers=${JSON.stringify(c.request.headers.map(([n, v]) => [n, v.slice(0, 80)]))} body=${JSON.stringify(body.slice(0, 300))}${body.length > 300 ? `…(${body.length} bytes)` : ''}`;
}

// ---------------------------------------------------------------------------------------------

let t: TestService;
let apiKey: string;
let merchantId: string;

/** What must not change: row counts, and the merchant's webhook and credential columns. */
async function snapshot() {
  const counts = await t.sql(`
    SELECT (SELECT count(*) FROM payments)::int AS payments, (SELECT count(*) FROM refunds)::int AS refunds,
           (SELECT count(*) FROM saved_cards)::int AS saved_cards, (SELECT count(*) FROM provider_credentials)::int AS provider_credentials,
           (SELECT count(*) FROM webhook_deliveries)::int AS webhook_deliveries, (SELECT count(*) FROM events)::int AS events,
           (SELECT count(*) FROM provider_events)::int AS provider_events, (SELECT count(*) FROM payment_transitions)::int AS payment_transitions,
           (SELECT count(*) FROM merchants)::int AS merchants, (SELECT count(*) FROM api_keys)::int AS api_keys,
           (SELECT count(*) FROM provider_status_queries)::int AS status_queries,
           (SELECT count(*) FROM agenda_jobs WHERE name NOT IN ('webhook.sweep', 'payments.sync-due'))::int AS jobs`);
  const merchant = await t.sql('SELECT webhook_url, webhook_secret_enc, updated_at FROM merchants WHERE id = $1', [merchantId]);
  return { counts: counts[0], merchant };
}

beforeAll(async () => {
  t = await startTestService();
  ({ apiKey, merchantId } = await t.createMerchant('Fuzz Target'));
});
afterAll(async () => t?.stop());

describe(`${RUNS} hostile requests across every route (seed ${SEED})`, () => {
  it('has a template for every route of the contract', () => {
    expect(Object.keys(ROUTES).filter((k) => !TEMPLATES[k])).toEqual([]);
    expect(Object.keys(TEMPLATES).filter((k) => !ROUTES[k])).toEqual([]);
  });

  it('never answers 5xx, always refuses in the envelope, and writes nothing', async () => {
    const before = await snapshot();
    // Deterministic: the same seed gives the same samples, and so the same requests, on every run.
    const cases: FuzzCase[] = [];
    for (const s of fc.sample(sampleArb, { numRuns: RUNS * 2, seed: SEED })) {
      const c = buildCase(s, apiKey);
      if (c) cases.push(c);
      if (cases.length === RUNS) break;
    }
    expect(cases).toHaveLength(RUNS);
    cases.push(...corpus(apiKey));

    const port = Number(new URL(t.baseUrl).port);
    const offenders: { kind: string; text: string }[] = [];
    const statuses = new Map<number, number>();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let i = next++; i < cases.length; i = next++) {
          const c = cases[i]!;
          let res: RawResponse;
          try {
            res = await rawRequest(port, c.request);
          } catch (err) {
            offenders.push({ kind: `no answer: ${(err as Error).message}`, text: `#${i} ${describeCase(c)}` });
            continue;
          }
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          const problem = problemWith(c, res);
          if (problem) offenders.push({ kind: `${c.route} ${problem}`.slice(0, 120), text: `#${i} ${problem}\n    ${describeCase(c)}` });
        }
      }),
    );
    const routesHit = new Set(cases.map((c) => c.route));
    if (offenders.length > 0) {
      // Up to three examples of each kind of failure, so one noisy kind does not hide the others.
      const byKind = new Map<string, string[]>();
      for (const o of offenders) byKind.set(o.kind, [...(byKind.get(o.kind) ?? []), o.text]);
      const report = [...byKind].map(([kind, texts]) => `${texts.length} × ${kind}\n${texts.slice(0, 3).join('\n')}`).join('\n');
      process.stdout.write(`\n${offenders.length} offending requests (seed ${SEED}):\n${report}\n`);
    }
    process.stdout.write(`fuzz statuses: ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}\n`);
    expect(offenders.map((o) => o.text)).toEqual([]);
    expect(routesHit.size).toBe(Object.keys(ROUTES).length);
    const facetCounts = new Map<string, number>();
    for (const c of cases) facetCounts.set(c.facet, (facetCounts.get(c.facet) ?? 0) + 1);
    process.stdout.write(`fuzz facets: ${JSON.stringify(Object.fromEntries(facetCounts))}\n`);
    for (const facet of ['body-surrogate', 'body-encoding', 'header-nonascii', 'amount']) expect(facetCounts.get(facet) ?? 0).toBeGreaterThan(50);
    expect(await snapshot()).toEqual(before);
  }, 180_000);

  it('leaves the API key out of the service log', () => {
    expect(findSecretsInFiles([inProcessLogFile(t.databaseUrl)], [apiKey])).toEqual([]);
  });
});
