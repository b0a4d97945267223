import type { Router } from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Agenda } from 'agenda';
import type pg from 'pg';
import type { AppConfig } from '../config/config.js';
import type { Logger } from '../observability/logger.js';
import type { HeldAnswers } from './held-answers.js';

/**
 * A built-in simulator of one provider's upstream API, mounted at /sandbox/<provider>. It speaks the
 * provider's real wire protocol, keeps its state in PostgreSQL (tables prefixed `sandbox_`), and sends
 * its callbacks from Agenda jobs (so they survive restarts and work across processes).
 */
export interface SandboxDeps {
  config: AppConfig;
  /** Context-aware EntityManager: walletpay and mobilemoney keep their state through it (`em.getConnection().execute(sql, params)`). */
  em: EntityManager;
  /** The simulators' own pool (sql.ts): their round trips are counted apart from the service's. */
  pool: pg.Pool;
  agenda: Agenda;
  logger: Logger;
  /** The answers held back in "hang" mode, ended when the service stops. */
  heldAnswers: HeldAnswers;
  /** How the simulators' webhooks and callbacks leave the process (every one goes through it: egress.ts). */
  egress: SandboxEgress;
}

/**
 * A simulator's outbound POST (its webhooks and callbacks), built by the composition root
 * (server/container.ts) from the policy merchant webhooks follow: one request, no redirect followed (a
 * 3xx is the answer, which the simulator counts as a failed delivery, as Stripe documents: "a URL
 * redirection … will be treated as a failure"), and no connection to a private, loopback or link-local
 * address unless WEBHOOK_ALLOW_PRIVATE_URLS is on, checked on the address connected to, not once
 * beforehand; the service's own origin (PUBLIC_BASE_URL, where the simulators call the service back)
 * is always reachable. A simulator cannot tell which URLs are safe: anyone with a test key registers them.
 */
export interface SandboxEgress {
  post(url: string, request: { headers: Record<string, string>; body: string; timeoutMs: number }): Promise<EgressAnswer>;
}

/**
 * The answer's status (a 3xx included: not followed), or why there is none: `refused` by the address
 * policy (nothing was sent), `timeout`, or `connection failed` (a DNS failure included).
 */
export type EgressAnswer = { status: number; failure: null } | { status: null; failure: 'refused' | 'timeout' | 'connection failed' };

export interface SandboxModule {
  path: string;
  router(deps: SandboxDeps): Router;
  /**
   * Makes what the provider has before anyone calls it (its key pairs and certificates), at boot: a
   * 2048-bit key made on a merchant's first request could outlast the adapter's timeout on a busy host.
   * It needs only the database (`npm test` also runs it once on its template database: scripts/prepare-test-template.ts).
   */
  prepare?(deps: Pick<SandboxDeps, 'em'>): Promise<void>;
  /** Registers the simulator's callback jobs (worker role). */
  defineJobs?(deps: SandboxDeps, define: <T>(name: string, body: (data: T) => Promise<void>) => void): void;
}
