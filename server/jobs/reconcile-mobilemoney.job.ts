import type { Agenda } from 'agenda';
import type { Container } from '../container.js';
import type { KeyLock } from '../persistence/key-lock.js';
import { AUTO_RECONCILE_WINDOW_MS } from '../domain/mobilemoney/mobilemoney-operations.service.js';
import { defineJob } from './define-job.js';

export const RECONCILE_MOBILEMONEY_JOB = 'mobilemoney.reconcile';

interface ReconcileJobData {
  merchantId: string;
}

/**
 * Automatic reconciliation (interface.md "Limits"): one repeating Agenda job per merchant with
 * mobilemoney credentials, every MOBILEMONEY_RECONCILE_INTERVAL (15 minutes), pulling the last 2 hours
 * and settling payments still pending. The job row is unique per merchant, so any number of workers
 * (and repeated scheduling) keep exactly one.
 */
export function defineReconcileMobilemoneyJob(container: Container): void {
  defineJob<ReconcileJobData>(container, RECONCILE_MOBILEMONEY_JOB, async ({ merchantId }) => {
    const ops = container.services.mobilemoney;
    if (!(await ops.merchantsWithCredentials()).includes(merchantId)) return;
    const until = new Date();
    const report = await ops.reconcileWindow(merchantId, new Date(until.getTime() - AUTO_RECONCILE_WINDOW_MS), until);
    container.logger.info({ merchantId, pulled: report.pulled, updated: report.updated, mismatched: report.mismatched, not_found: report.not_found }, 'automatic mobilemoney reconciliation');
  }, { concurrency: 2 });
}

/**
 * Agenda's `unique()` save is a SELECT then an INSERT, so two processes scheduling one merchant at once
 * (credentials stored through two api processes, workers booting together) would both insert. The
 * merchant's advisory lock makes the check-and-insert one step across processes.
 */
const SCHEDULE_LOCK_WAIT_MS = 30_000;
const scheduleLockKey = (merchantId: string) => `mobilemoney-reconcile-job:${merchantId}`;

export async function scheduleMobilemoneyReconciliation(agenda: Agenda, locks: KeyLock, intervalMs: number, merchantId: string): Promise<void> {
  await locks.withLock(scheduleLockKey(merchantId), SCHEDULE_LOCK_WAIT_MS, async () => {
    await agenda
      .create<ReconcileJobData>(RECONCILE_MOBILEMONEY_JOB, { merchantId })
      .unique({ 'data.merchantId': merchantId })
      .repeatEvery(intervalMs, { skipImmediate: true })
      .save();
  });
}

export async function cancelMobilemoneyReconciliation(agenda: Agenda, locks: KeyLock, merchantId: string): Promise<void> {
  await locks.withLock(scheduleLockKey(merchantId), SCHEDULE_LOCK_WAIT_MS, async () => {
    await agenda.cancel({ name: RECONCILE_MOBILEMONEY_JOB, data: { merchantId } });
  });
}

/** At worker start: every merchant with mobilemoney credentials has its job (idempotent). */
export async function scheduleAllMobilemoneyReconciliations(container: Container): Promise<void> {
  const merchants = await container.orm.em.fork().getConnection().execute<{ merchant_id: string }[]>(
    `SELECT merchant_id FROM provider_credentials WHERE provider = 'mobilemoney'`,
  );
  for (const { merchant_id } of merchants) {
    await scheduleMobilemoneyReconciliation(container.agenda, container.keyLock, container.config.mobilemoneyReconcileIntervalMs, merchant_id);
  }
}
