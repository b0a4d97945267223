import type { Provider } from '../../../contract/index.js';
import { pullOutage, type ReconciliationPull } from './lost-creation.js';

type PullReport = Awaited<ReturnType<ReconciliationPull>>;

/**
 * One status-sync run's judging pulls (lost-creation.ts), per provider account (merchant and provider). The
 * lost pushes of one account are checked side by side (CHECKS_AT_ONCE), so each waits for the account's pull
 * under way, then:
 * - that pull met a rate limit or an outage: the same failure, with no pull sent (the account is not asked
 *   again in the run: DrainRun.rateLimitedAccounts, which is only consulted before a check starts);
 * - its window covers this one's: its report (reconciliation settled what it listed once);
 * - otherwise this payment's own pull.
 */
export class SharedPulls {
  private readonly last = new Map<string, { since: number; until: number; report: Promise<PullReport> }>();

  constructor(private readonly pull: ReconciliationPull) {}

  readonly shared: ReconciliationPull = async (merchantId: string, provider: Provider, since: Date, until: Date) => {
    const account = `${merchantId}:${provider}`;
    for (;;) {
      const prev = this.last.get(account);
      if (!prev) break;
      try {
        const report = await prev.report;
        if (prev.since <= since.getTime() && prev.until >= until.getTime()) return report;
      } catch (err) {
        if (pullOutage(err)) throw err;
      }
      // Another check may have started a pull while this one waited: wait for that one instead.
      if (this.last.get(account) === prev) break;
    }
    const report = this.pull(merchantId, provider, since, until);
    this.last.set(account, { since: since.getTime(), until: until.getTime(), report });
    return report;
  };
}
