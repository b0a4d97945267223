import { generateOpenApi } from '@ts-rest/open-api';
import type { AppRoute } from '@ts-rest/core';
import { contract, type RouteMetadata } from '../../contract/index.js';

const ERROR_DESCRIPTIONS: Record<string, string> = {
  '400': 'Malformed JSON (BAD_REQUEST)',
  '401': 'Missing, unknown or revoked API key (UNAUTHORIZED)',
  '403': 'The API key lacks the scope this operation needs (FORBIDDEN)',
  '404': 'Unknown id, or an id owned by another merchant (NOT_FOUND)',
  '409': 'Conflict with the current state (CONFLICT)',
  '413': 'Body larger than 100 KiB (PAYLOAD_TOO_LARGE)',
  '422': 'Invalid input, with field details (VALIDATION_ERROR)',
  '429': 'Too many requests; see Retry-After (RATE_LIMITED)',
  '500': 'Unexpected error; quote the request id (INTERNAL_ERROR)',
  '502': 'The provider was unreachable or refused the request (PROVIDER_ERROR)',
};

/** openapi.json, generated from the contract; `npm run openapi` writes it, CI checks it is current. */
export function openApiDocument() {
  const document = generateOpenApi(
    contract,
    {
      info: {
        title: 'Payments API',
        version: '1.0.0',
        description:
          'One API for card (cardpay), mobile-money (mobilemoney) and wallet (walletpay) payments, with signed event webhooks. ' +
          'Authenticate with the `X-API-Key` header. Every response uses the envelope `{ success, data, meta? }` or ' +
          '`{ success: false, error: { code, message, details?, request_id } }`. See the README for the quick start.',
      },
      servers: [{ url: 'http://localhost:3000', description: 'Local service (npm start)' }],
      components: {
        securitySchemes: { ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' } },
      },
    },
    {
      setOperationId: 'concatenated-path',
      operationMapper: (operation, route: AppRoute) => {
        const metadata = route.metadata as RouteMetadata | undefined;
        for (const [status, response] of Object.entries(operation.responses ?? {})) {
          const description = ERROR_DESCRIPTIONS[status];
          if (description && response && typeof response === 'object') (response as { description: string }).description = description;
        }
        return {
          ...operation,
          tags: metadata ? [metadata.tag] : operation.tags,
          security: metadata?.scope ? [{ ApiKey: [] }] : [],
          ...(metadata?.scope ? { 'x-required-scope': metadata.scope } : {}),
        };
      },
    },
  );
  return document;
}
