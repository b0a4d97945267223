import { generateOpenApi } from '@ts-rest/open-api';
import { isAppRoute, type AppRoute, type AppRouter } from '@ts-rest/core';
import {
  OUTBOUND_WEBHOOK_DELIVERY_RULES, OUTBOUND_WEBHOOK_EVENTS, OUTBOUND_WEBHOOK_HEADERS, contract, type RouteMetadata,
} from '../../contract/index.js';
import { METRICS_EXAMPLE, operationsContract } from '../../contract/operations.js';
import { OUTCOME_HEADER, REPLAYED_ERRORS, ROUTE_ERROR_EXAMPLES } from '../../contract/errors.js';
import { polishDocument } from './openapi-polish.js';

/** One line per tag in /docs; a tag used by a route but missing here gets a generic line. */
const TAG_DESCRIPTIONS: Record<string, string> = {
  Merchant: 'The authenticated merchant: its webhook URL and its provider credentials (stored encrypted, shown masked).',
  Payments: 'Create, read, list and capture payments through cardpay, mobilemoney or walletpay.',
  'Saved cards': 'Cards saved at the card provider (cardpay) for later off-session charges.',
  'Mobile money': 'mobilemoney operations: status queries, reconciliation of missed callbacks, pull API registration.',
  Refunds: 'Full and partial refunds; mobilemoney refunds are asynchronous reversals.',
  Webhooks: 'The outbound event deliveries to the merchant webhook URL: the delivery log, manual retries, recovering a window of failed deliveries, and a test event. Every delivery is signed twice: X-Payments-Signature and the Standard Webhooks webhook-signature.',
  Events: 'Every event the outbox holds for the merchant, exactly as its webhook body is delivered, kept for the retention period (30 days by default).',
  'Provider callbacks': 'Called by the providers, never by merchants: no API key; each verified with the provider’s own scheme.',
  Operations: 'Liveness, readiness and Prometheus metrics for operators (no API key; /metrics can require METRICS_TOKEN).',
};

const DESCRIPTION = `One API for card (cardpay), mobile-money (mobilemoney) and wallet (walletpay) payments, with signed event webhooks.

**Quick start** — the full walk-through is the [README quick start](README.md#quick-start), and the typed
TypeScript SDK is described in [README → SDK](README.md#sdk):

1. Get an API key from your administrator (\`npm run admin -- key create --merchant <id> --scopes …\`) and send it as \`X-API-Key\`.
2. Store provider credentials: \`PUT /v1/merchant/credentials\` with \`{"provider":"cardpay","cardpay":{"secret_key":"sk_test_…"}}\`.
3. Register your webhook URL: \`PUT /v1/merchant/webhook\` (the \`whsec_\` signing secret is shown once).
4. Create a payment: \`POST /v1/payments\` with an \`Idempotency-Key\` header and
   \`{"provider":"cardpay","amount":"25.00","currency":"USD","payment_method":"pm_card_visa"}\`.

Every response uses the envelope \`{ success, data, meta? }\` or \`{ success: false, error: { code, message, details?, request_id } }\`,
and carries \`X-Request-Id\`. Amounts are decimal strings in major units.`;

function routesOf(router: AppRouter): AppRoute[] {
  return Object.values(router).flatMap((value) => (isAppRoute(value) ? [value] : routesOf(value as AppRouter)));
}

function tagsOf(router: AppRouter) {
  const names = [...new Set(routesOf(router).map((route) => (route.metadata as RouteMetadata | undefined)?.tag).filter((t): t is string => !!t))];
  return names.map((name) => ({ name, description: TAG_DESCRIPTIONS[name] ?? `${name} operations.` }));
}

/** The outbound webhooks (interface.md "Events") as OpenAPI 3.0's `x-webhooks`: one POST per event type. */
function outboundWebhooks() {
  return Object.fromEntries(
    Object.entries(OUTBOUND_WEBHOOK_EVENTS).map(([type, event]) => [
      type,
      {
        post: {
          summary: event.summary,
          description: OUTBOUND_WEBHOOK_DELIVERY_RULES,
          operationId: `webhook-${type.replace('.', '-')}`,
          tags: ['Webhooks'],
          security: [],
          parameters: OUTBOUND_WEBHOOK_HEADERS.map((h) => ({
            name: h.name,
            in: 'header',
            required: true,
            description: h.description,
            schema: { type: 'string', example: h.name === 'X-Event-Type' ? type : h.example },
          })),
          requestBody: {
            required: true,
            description: `The ${type} event`,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Event' }, example: event.example } },
          },
          responses: {
            '2XX': { description: 'Acknowledged: the delivery is done' },
            default: { description: 'Anything else (or no answer within 30 s) is a failed attempt, retried on the schedule' },
          },
        },
      },
    ]),
  );
}

const SUCCESS_NAMES: Record<string, string> = { '200': 'OK', '201': 'Created' };
const REPLAY = 'the same Idempotency-Key and body sent again return the original result, marked Idempotent-Replayed: true; nothing is done twice';
const REPLAY_HEADER = ' An error the first request ended with is replayed the same way, with this header.';

/**
 * A route that takes an Idempotency-Key: the success status(es) a replay answers with get the
 * Idempotent-Replayed header and say so, next to what they mean on a first request. A replay answers
 * with the route's own success status unless `replayStatus` names another (payment creation: 201 at
 * first, 200 on a replay); then that status is the replay only, and the first one never carries the header.
 */
function documentReplays(name: string, responses: Record<string, unknown>, replayStatus: number | undefined) {
  const replayedErrors = replayedErrorsOf(name);
  documentReplayedErrors(responses, replayedErrors);
  const errorsToo = replayedErrors.length > 0 ? REPLAY_HEADER : '';
  const successes = Object.keys(responses).filter((status) => /^2\d\d$/.test(status));
  for (const status of successes) {
    const response = responses[status];
    if (!response || typeof response !== 'object' || '$ref' in response) continue;
    const r = response as { description?: string; headers?: Record<string, unknown> };
    const name = SUCCESS_NAMES[status] ?? `HTTP ${status}`;
    const replayOnly = replayStatus !== undefined && Number(status) === replayStatus;
    if (replayStatus !== undefined && !replayOnly) {
      r.description = `${name}: the first answer given to this Idempotency-Key — to its first request, or to a retry that resumed a request left unanswered (its replays answer ${replayStatus})`;
      continue;
    }
    r.description = replayOnly
      ? `The original result, replayed: ${REPLAY}`
      : `${name}. Also the answer to a replay: ${REPLAY}`;
    r.headers = {
      ...(r.headers ?? {}),
      'Idempotent-Replayed': replayedHeader(
        replayOnly
          ? `\`true\`: this answer replays the first one given to this Idempotency-Key.${errorsToo}`
          : `\`true\` when this answer replays the first one given to this Idempotency-Key; absent on a first answer (also a retry's that resumed a request left unanswered).${errorsToo}`,
        replayOnly,
      ),
    };
  }
}

/** The Idempotent-Replayed response header, as a success or an error documents it. */
const replayedHeader = (description: string, required: boolean) => ({ description, required, schema: { type: 'string', enum: ['true'] } });

/** The route's errors a retry with the same key replays (contract/errors.ts); a route missing there is an oversight. */
function replayedErrorsOf(name: string): readonly string[] {
  const replayed = REPLAYED_ERRORS[name];
  if (!replayed) throw new Error(`${name} takes an Idempotency-Key: say in REPLAYED_ERRORS (contract/errors.ts) which of its errors a retry replays`);
  return replayed;
}

/**
 * The error responses a retry replays carry the Idempotent-Replayed header too (copied: the generator may
 * share response objects); so does the 409's Retry-After, which tells the passing conflict from the final ones.
 */
function documentReplayedErrors(responses: Record<string, unknown>, replayedErrors: readonly string[]) {
  for (const status of ['404', '409', '422', '502']) {
    const response = responses[status];
    if (!response || typeof response !== 'object' || '$ref' in response) continue;
    const replayed = replayedErrors.includes(status);
    if (!replayed && status !== '409') continue;
    const r = response as { headers?: Record<string, unknown> };
    responses[status] = {
      ...r,
      headers: {
        ...(r.headers ?? {}),
        ...(replayed ? { 'Idempotent-Replayed': replayedHeader('`true` when this error replays the one the first request with this Idempotency-Key ended with; absent otherwise.', false) } : {}),
        // Retry-After tells the one passing 409 (the same key still being processed) from the final ones.
        ...(status === '409'
          ? { 'Retry-After': { description: 'Sent only when a request with this Idempotency-Key is still being processed: retry with the same key after this many seconds (the answer is then the first request\'s). Absent on every other conflict, which retrying does not change.', schema: { type: 'integer', example: 1 } } }
          : {}),
      },
    };
  }
}

/** What Payments-Outcome says on each status that may carry it. */
const OUTCOME_DESCRIPTIONS: Record<'500' | '502', string> = {
  '502':
    '`unknown`: the provider did not say whether it acted (no answer in time, an outage, its server error), so the operation may have been carried out — the customer may have been charged. ' +
    'Do not treat it as refused: retry with the same Idempotency-Key (the provider answers with the first result if there was one) or read the resource. ' +
    'Absent when the provider refused, or was refused before acting: nothing was done.',
  '500':
    '`unknown`: the service failed (e.g. no database connection free to record the answer) after the provider may have acted, so the operation may have been carried out — the customer may have been charged or refunded. ' +
    'Do not treat it as refused, nor send it again with a new Idempotency-Key: retry with the same key (the retry resumes the request, and the provider acts at most once) or read the resource; the payment or refund stays pending until then or until the status sync settles it. ' +
    'Absent on a 500 before anything was reserved or sent.',
};

/**
 * A route whose 502 may leave the outcome unknown (`outcomeMayBeUnknown`), and every route taking an
 * Idempotency-Key for its 500, documents the header that says so (copied, as above).
 */
function documentOutcomeHeader(responses: Record<string, unknown>, status: '500' | '502') {
  const response = responses[status];
  if (!response || typeof response !== 'object' || '$ref' in response) return;
  const r = response as { headers?: Record<string, unknown> };
  responses[status] = {
    ...r,
    headers: {
      ...(r.headers ?? {}),
      [OUTCOME_HEADER.name]: { description: OUTCOME_DESCRIPTIONS[status], required: false, schema: { type: 'string', enum: [OUTCOME_HEADER.unknown] } },
    },
  };
}

/** openapi.json, generated from the contract; `npm run openapi` writes it, CI checks it is current and lints it. */
export function openApiDocument() {
  const document = generateOpenApi(
    { ...contract, operations: operationsContract },
    {
      info: {
        title: 'Payments API',
        version: '1.0.0',
        description: DESCRIPTION,
        license: { name: 'MIT', url: 'https://opensource.org/licenses/MIT' },
      },
      // Relative: "Try it out" in /docs calls the host the document was fetched from, wherever it runs.
      servers: [{ url: '/', description: 'This service' }],
      tags: tagsOf({ ...contract, operations: operationsContract }),
      components: {
        securitySchemes: { ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' } },
      },
    },
    {
      setOperationId: 'concatenated-path',
      operationMapper: (operation, route: AppRoute) => {
        const metadata = route.metadata as RouteMetadata | undefined;
        const takesIdempotencyKey = (operation.parameters ?? []).some((p) => 'in' in p && p.in === 'header' && p.name === 'idempotency-key');
        // The operation as openapi.json and ROUTE_ERROR_EXAMPLES name it: `POST /v1/payments/{id}/capture`.
        const name = `${route.method} ${route.path.replace(/:([A-Za-z_]+)/g, '{$1}')}`;
        if (takesIdempotencyKey) documentReplays(name, operation.responses ?? {}, metadata?.replayStatus);
        if (takesIdempotencyKey) documentOutcomeHeader(operation.responses ?? {}, '500');
        if (metadata?.outcomeMayBeUnknown) documentOutcomeHeader(operation.responses ?? {}, '502');
        // A body the route cannot do without is required (ts-rest leaves every requestBody optional).
        const body = 'body' in route ? (route.body as { isOptional?: () => boolean } | null) : null;
        const requestBody =
          operation.requestBody && body && typeof body.isOptional === 'function' && !body.isOptional()
            ? { ...operation.requestBody, required: true }
            : operation.requestBody;
        // A callback's headers as the provider spells them; those its verification needs are required (a missing one is 401, not a 422).
        const callbackHeaders = new Map(Object.entries(metadata?.callbackHeaders ?? {}).map(([h, need]) => [h.toLowerCase(), { name: h, need }]));
        const parameters = operation.parameters?.map((p) => {
          const known = 'in' in p && p.in === 'header' ? callbackHeaders.get(p.name) : undefined;
          return known ? { ...p, name: known.name, ...(known.need === 'required' ? { required: true } : {}) } : p;
        });
        return {
          ...operation,
          ...(parameters ? { parameters } : {}),
          ...(requestBody ? { requestBody } : {}),
          tags: metadata ? [metadata.tag] : operation.tags,
          security: metadata?.scope ? [{ ApiKey: [] }] : [],
          ...(metadata?.scope ? { 'x-required-scope': metadata.scope } : {}),
        };
      },
    },
  );
  const polished = polishDocument(document as unknown as Record<string, unknown>);
  polished['x-webhooks'] = outboundWebhooks();
  // ts-rest's generator leaves non-JSON responses without content: /metrics answers Prometheus text.
  const metrics = (polished.paths as Record<string, { get: { responses: Record<string, Record<string, unknown>> } }>)['/metrics']!.get.responses['200']!;
  metrics.content = { 'text/plain': { schema: { type: 'string' }, example: METRICS_EXAMPLE } };
  return polished as unknown as typeof document;
}
