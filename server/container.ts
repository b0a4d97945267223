import type { Router } from 'express';
import type { Agenda } from 'agenda';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { AppConfig } from './config/config.js';
import { resolveEncryptionKey } from './config/encryption-key.js';
import { ApiKeyService } from './domain/auth/api-key.service.js';
import { SecretBox } from './domain/crypto/secret-box.js';
import { CredentialsService } from './domain/merchants/credentials.service.js';
import { MerchantService } from './domain/merchants/merchant.service.js';
import { createAgenda } from './jobs/agenda.js';
import type { Logger } from './observability/logger.js';
import { Metrics } from './observability/metrics.js';
import { openOrm } from './persistence/orm.js';
import { sandboxModules } from './sandbox/index.js';
import type { SandboxDeps } from './sandbox/module.js';

export interface Services {
  apiKeys: ApiKeyService;
  merchants: MerchantService;
  credentials: CredentialsService;
}

/** Everything the roles need, wired once. The only module that imports concrete adapters. */
export interface Container {
  config: AppConfig;
  logger: Logger;
  metrics: Metrics;
  orm: MikroORM;
  agenda: Agenda;
  secrets: SecretBox;
  services: Services;
  sandboxMounts: { path: string; router: Router }[];
  sandboxDeps: SandboxDeps;
  readiness(): Promise<Record<string, boolean>>;
  close(): Promise<void>;
}

export interface ContainerOptions {
  databaseUrl: string;
  logger: Logger;
  agendaProcessEveryMs?: number;
  agendaLockLifetimeMs?: number;
}

export async function createContainer(config: AppConfig, options: ContainerOptions): Promise<Container> {
  const orm = await openOrm(options.databaseUrl);
  const secrets = new SecretBox(await resolveEncryptionKey(config));
  const em = orm.em;
  const agenda = createAgenda({
    databaseUrl: options.databaseUrl,
    name: `${config.role}-${process.pid}`,
    processEveryMs: options.agendaProcessEveryMs ?? 5000,
    lockLifetimeMs: options.agendaLockLifetimeMs ?? 10 * 60_000,
  });
  let agendaReady = false;
  agenda.on('ready', () => (agendaReady = true));

  const services: Services = {
    apiKeys: new ApiKeyService(em),
    merchants: new MerchantService(em, secrets, config.webhookAllowPrivateUrls),
    credentials: new CredentialsService(em, secrets),
  };

  const sandboxDeps: SandboxDeps = { config, em, agenda, logger: options.logger };
  const sandboxMounts = config.sandbox ? sandboxModules.map((m) => ({ path: m.path, router: m.router(sandboxDeps) })) : [];

  return {
    config,
    logger: options.logger,
    metrics: new Metrics(),
    orm,
    agenda,
    secrets,
    services,
    sandboxMounts,
    sandboxDeps,
    async readiness() {
      const database = await orm.em.getConnection().execute('SELECT 1').then(() => true, () => false);
      const jobRunner = agendaReady
        ? await orm.em.getConnection().execute('SELECT 1 FROM agenda_jobs LIMIT 1').then(() => true, () => false)
        : false;
      return { database, job_runner: jobRunner };
    },
    async close() {
      await orm.close(true);
    },
  };
}
