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
}

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
