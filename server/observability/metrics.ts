import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { DELIVERY_STATUSES } from '../../contract/webhook-logs.js';

/** Prometheus metrics of one process; scraped at GET /metrics. */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  /**
   * Provider reports refused because their amount or currency is not the payment's (or the refund's); and
   * a charge the provider reports for a payment recorded failed (source `<source>:charged_but_failed`, once per payment);
   * and a second charge quoting a payment already paid (source `reconciliation:duplicate_charge`, once per receipt).
   */
  readonly integrityMismatches = new Counter({
    name: 'payments_integrity_mismatches_total',
    help: 'Provider-reported outcomes refused by the integrity check, charges for payments recorded failed (source ending :charged_but_failed), or second charges of paid payments (source ending :duplicate_charge), by provider and source',
    labelNames: ['provider', 'source'] as const,
    registers: [this.registry],
  });

  /** Every call to a provider's API (through the adapters' ports), by operation and outcome. */
  readonly providerCalls = new Histogram({
    name: 'provider_call_duration_seconds',
    help: 'Provider API calls by provider, operation (port method) and outcome (ok or the error kind)',
    labelNames: ['provider', 'operation', 'outcome'] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  /** Inbound provider callbacks as answered: accepted (2xx), rejected (4xx) or failed (5xx). */
  readonly providerCallbacks = new Counter({
    name: 'provider_callbacks_total',
    help: 'Provider callbacks received, by provider and outcome (accepted, rejected, failed)',
    labelNames: ['provider', 'outcome'] as const,
    registers: [this.registry],
  });

  /** Merchant webhook attempts this process made, by the delivery's status after each (delivered, retrying, dead: only the scheduled attempt that used up the retry schedule, see DeliveryService.attempt). */
  readonly webhookDeliveryAttempts = new Counter({
    name: 'webhook_delivery_attempts_total',
    help: "Merchant webhook attempts, by the delivery's status after the attempt (delivered, retrying, dead: once per delivery, when its retry schedule is used up)",
    labelNames: ['status'] as const,
    registers: [this.registry],
  });

  /**
   * Scheduled webhook attempts not made because the merchant's signing secret opens with none of this
   * process's keys: the delivery is given back unsent (an operator's key configuration, not the merchant's endpoint).
   */
  readonly webhookSecretUnreadable = new Counter({
    name: 'webhook_secret_unreadable_total',
    help: "Scheduled merchant webhook attempts not made (the delivery given back, due again shortly) because the merchant's signing secret opens with neither ENCRYPTION_KEY nor DECRYPTION_KEYS",
    registers: [this.registry],
  });

  /** Every query sent to PostgreSQL (BEGIN and COMMIT included), by pool: service (ORM), jobs (Agenda), sandbox (simulators), listener (the cache's LISTEN connection). */
  readonly dbRoundTrips = new Counter({
    name: 'db_round_trips_total',
    help: 'Round trips to PostgreSQL (every query a pooled connection sends, BEGIN/COMMIT included), by pool',
    labelNames: ['pool'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    // Every attempt status starts at 0: increase() reads a series that first appears at 1 as no change,
    // so a process's first dead delivery would never fire PaymentsWebhooksDead.
    for (const status of DELIVERY_STATUSES) if (status !== 'pending') this.webhookDeliveryAttempts.inc({ status }, 0);
  }
}
