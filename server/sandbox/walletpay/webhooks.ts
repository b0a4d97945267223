import type { Router } from 'express';
import type { SandboxDeps } from '../module.js';
import { clientIdOf } from './auth.js';
import { dbOf, paypalId, route, simulatorBase } from './db.js';
import { PaypalError, invalid, notFound } from './errors.js';
import { isObject, missing, optionalUrl } from './params.js';
import { certUrl, signedMessage, signingKeys, verifyTransmission } from './signing.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** PayPal allows 10 webhooks per app. */
const MAX_WEBHOOKS = 10;

interface WebhookRow {
  id: string;
  client_id: string;
  url: string;
  event_types: { name: string }[];
}

function webhookView(base: string, w: WebhookRow): Record<string, unknown> {
  const self = `${base}/v1/notifications/webhooks/${w.id}`;
  return {
    id: w.id,
    url: w.url,
    event_types: w.event_types.map((t) => ({ name: t.name, description: t.name === '*' ? 'ALL' : t.name, status: 'ENABLED' })),
    links: [
      { href: self, rel: 'self', method: 'GET' },
      { href: self, rel: 'update', method: 'PATCH' },
      { href: self, rel: 'delete', method: 'DELETE' },
    ],
  };
}

function parseEventTypes(raw: unknown): { name: string }[] {
  if (raw === undefined) throw missing('/event_types');
  if (!Array.isArray(raw) || raw.length === 0) throw invalid('INVALID_PARAMETER_SYNTAX', '/event_types', 'At least one event type is required.');
  return raw.map((t, i) => {
    const name = isObject(t) ? t.name : undefined;
    if (typeof name !== 'string' || !/^(\*|[A-Z][A-Z0-9_]*(\.[A-Z0-9_]+)*)$/.test(name)) {
      throw invalid('INVALID_PARAMETER_SYNTAX', `/event_types/${i}/name`, 'The event type name is not valid.');
    }
    return { name };
  });
}

/** Compares two JSON documents ignoring formatting (key order included, as PayPal's bodies keep theirs). */
function sameJson(raw: string, value: unknown): boolean {
  try {
    return JSON.stringify(JSON.parse(raw)) === JSON.stringify(value);
  } catch {
    return false;
  }
}

/** Public (no token): receivers download the signing certificate (X.509, PEM), as from PayPal's. */
export function mountCertificate(router: Router, deps: SandboxDeps): void {
  const db = () => dbOf(deps.em);
  router.get(
    '/v1/notifications/certs/:certId',
    route(async (req, res) => {
      const keys = await signingKeys(db());
      if (req.params.certId !== keys.certId) throw notFound('INVALID_RESOURCE_ID', 'Certificate not found.');
      res.type('application/x-pem-file').send(keys.certificatePem);
    }),
  );
}

/**
 * Webhook subscriptions (`/v1/notifications/webhooks`) and the postback
 * `POST /v1/notifications/verify-webhook-signature`.
 *
 * The postback gets the event as parsed JSON (`webhook_event`), not the bytes that were signed. It
 * verifies against the raw body recorded for that transmission id when the event matches it, and
 * otherwise against `JSON.stringify(webhook_event)` — which reproduces the sent bytes, since the
 * simulator serialises events the same compact way.
 */
export function mountWebhooks(router: Router, deps: SandboxDeps): void {
  const base = () => simulatorBase(deps.config.publicBaseUrl);
  const db = () => dbOf(deps.em);

  router.post(
    '/v1/notifications/webhooks',
    route(async (req, res) => {
      const clientId = clientIdOf(res);
      const body: unknown = req.body;
      if (!isObject(body)) throw invalid('MALFORMED_REQUEST_JSON', '', 'The request JSON is not well formed.');
      const url = optionalUrl(body, 'url', '/url');
      if (!url) throw missing('/url');
      const eventTypes = parseEventTypes(body.event_types);
      const [{ n }] = (await db().query<{ n: number }>('SELECT count(*)::int AS n FROM sandbox_walletpay_webhooks WHERE client_id = ?', [clientId])) as [{ n: number }];
      if (n >= MAX_WEBHOOKS) throw new PaypalError(400, [], 'Maximum number of webhooks reached.', 'WEBHOOK_NUMBER_LIMIT_EXCEEDED');
      const [row] = await db().query<WebhookRow>(
        `INSERT INTO sandbox_walletpay_webhooks (id, client_id, url, event_types) VALUES (?, ?, ?, ?::jsonb)
         ON CONFLICT (client_id, url) DO NOTHING RETURNING *`,
        [paypalId(17), clientId, url, JSON.stringify(eventTypes)],
      );
      if (!row) throw new PaypalError(400, [], 'Webhook URL already exists', 'WEBHOOK_URL_ALREADY_EXISTS');
      res.status(201).json(webhookView(base(), row));
    }),
  );

  router.get(
    '/v1/notifications/webhooks',
    route(async (_req, res) => {
      const rows = await db().query<WebhookRow>('SELECT * FROM sandbox_walletpay_webhooks WHERE client_id = ? ORDER BY created_at, id', [clientIdOf(res)]);
      res.json({ webhooks: rows.map((w) => webhookView(base(), w)) });
    }),
  );

  router.get(
    '/v1/notifications/webhooks/:id',
    route(async (req, res) => {
      const [row] = await db().query<WebhookRow>('SELECT * FROM sandbox_walletpay_webhooks WHERE id = ? AND client_id = ?', [req.params.id, clientIdOf(res)]);
      if (!row) throw new PaypalError(404, [], 'Webhook not found.', 'INVALID_RESOURCE_ID');
      res.json(webhookView(base(), row));
    }),
  );

  /**
   * `PATCH /v1/notifications/webhooks/:id`: a JSON Patch array whose operations may only `replace`
   * `/url` or `/event_types` (PayPal: "Supports only the replace operation"); a patch that changes nothing
   * is 400 WEBHOOK_PATCH_REQUEST_NO_CHANGE.
   */
  router.patch(
    '/v1/notifications/webhooks/:id',
    route(async (req, res) => {
      const clientId = clientIdOf(res);
      const ops: unknown = req.body;
      if (!Array.isArray(ops) || ops.length === 0) throw invalid('MALFORMED_REQUEST_JSON', '', 'The request JSON is not a JSON Patch array.');
      const [row] = await db().query<WebhookRow>('SELECT * FROM sandbox_walletpay_webhooks WHERE id = ? AND client_id = ?', [req.params.id, clientId]);
      if (!row) throw new PaypalError(404, [], 'Webhook not found.', 'INVALID_RESOURCE_ID');
      let url = row.url;
      let eventTypes = row.event_types;
      ops.forEach((op: unknown, i) => {
        if (!isObject(op) || op.op !== 'replace') throw invalid('INVALID_PARAMETER_VALUE', `/${i}/op`, 'Only the replace operation is supported.');
        if (op.path === '/url') {
          const value = optionalUrl({ url: op.value }, 'url', `/${i}/value`);
          if (!value) throw missing(`/${i}/value`);
          url = value;
        } else if (op.path === '/event_types') {
          eventTypes = parseEventTypes(op.value);
        } else {
          throw invalid('INVALID_PARAMETER_VALUE', `/${i}/path`, 'Only /url and /event_types can be replaced.');
        }
      });
      if (url === row.url && JSON.stringify(eventTypes) === JSON.stringify(row.event_types)) {
        throw new PaypalError(400, [], 'No change in webhook.', 'WEBHOOK_PATCH_REQUEST_NO_CHANGE');
      }
      const [updated] = await db().query<WebhookRow>(
        `UPDATE sandbox_walletpay_webhooks SET url = ?, event_types = ?::jsonb WHERE id = ? AND client_id = ?
         AND NOT EXISTS (SELECT 1 FROM sandbox_walletpay_webhooks o WHERE o.client_id = ? AND o.url = ? AND o.id <> ?) RETURNING *`,
        [url, JSON.stringify(eventTypes), row.id, clientId, clientId, url, row.id],
      );
      if (!updated) throw new PaypalError(400, [], 'Webhook URL already exists', 'WEBHOOK_URL_ALREADY_EXISTS');
      res.json(webhookView(base(), updated));
    }),
  );

  router.delete(
    '/v1/notifications/webhooks/:id',
    route(async (req, res) => {
      const rows = await db().query<{ id: string }>('DELETE FROM sandbox_walletpay_webhooks WHERE id = ? AND client_id = ? RETURNING id', [req.params.id, clientIdOf(res)]);
      if (!rows[0]) throw new PaypalError(404, [], 'Webhook not found.', 'INVALID_RESOURCE_ID');
      res.status(204).end();
    }),
  );

  router.post(
    '/v1/notifications/verify-webhook-signature',
    route(async (req, res) => {
      const body: unknown = req.body;
      if (!isObject(body)) throw invalid('MALFORMED_REQUEST_JSON', '', 'The request JSON is not well formed.');
      const fields = ['auth_algo', 'cert_url', 'transmission_id', 'transmission_sig', 'transmission_time', 'webhook_id'] as const;
      for (const f of fields) if (typeof body[f] !== 'string' || body[f] === '') throw missing(`/${f}`);
      if (!isObject(body.webhook_event)) throw missing('/webhook_event');
      const p = body as Record<(typeof fields)[number], string> & { webhook_event: Record<string, unknown> };

      const failure = () => res.json({ verification_status: 'FAILURE' });
      // The webhook must be one of the caller's own subscriptions.
      const [webhook] = await db().query<{ id: string }>('SELECT id FROM sandbox_walletpay_webhooks WHERE id = ? AND client_id = ?', [p.webhook_id, clientIdOf(res)]);
      if (!webhook || p.auth_algo !== 'SHA256withRSA') return failure();
      const keys = await signingKeys(db());
      let certPath: string;
      try {
        certPath = new URL(p.cert_url).pathname;
      } catch {
        return failure();
      }
      if (!certPath.endsWith(new URL(certUrl(base(), keys.certId)).pathname)) return failure();

      const candidates = [JSON.stringify(p.webhook_event)];
      if (UUID.test(p.transmission_id)) {
        const [sent] = await db().query<{ raw_body: string }>('SELECT raw_body FROM sandbox_walletpay_transmissions WHERE id = ? AND webhook_id = ?', [p.transmission_id, p.webhook_id]);
        if (sent && sameJson(sent.raw_body, p.webhook_event)) candidates.unshift(sent.raw_body);
      }
      const ok = candidates.some((raw) =>
        verifyTransmission(keys, signedMessage(p.transmission_id, p.transmission_time, p.webhook_id, raw), p.transmission_sig),
      );
      res.json({ verification_status: ok ? 'SUCCESS' : 'FAILURE' });
    }),
  );
}
