import type { Provider } from '../../../contract/index.js';
import { RECONCILE_MAX_WINDOW_MS } from '../operations/reconcile-windows.js';
import { UNREPEATABLE_CREATION_CHECK_AFTER_MS, UNREPEATABLE_CREATION_PULL_LEAD_MS, pullOutage, type ReconciliationPull } from './lost-creation.js';

type PullReport = Awaited<ReturnType<ReconciliationPull>>;

/**
 * A shared pull starts this much earlier than its push's own window: the pushes of one account due in one run
 * are checked in no set order, and one created up to this long before the push whose pull runs first is covered
 * too (an hour more of the account's transactions, against a pull per push).
 */
const SHARED_PULL_EXTRA_LEAD_MS = 3_600_000;

/**
 * One status-sync run's judging pulls (lost-creation.ts), per provider account (merchant and provider). The
 * lost pushes of one account are checked side by side (CHECKS_AT_ONCE), so each waits for the account's pull
 * under way, then:
 * - that pull met a rate limit or an outage: the same failure, with no pull sent (the account is not asked
 *   again in the run: DrainRun.rateLimitedAccounts, which is only consulted before a check starts);
 * - its window covers this one's up to the push's check time (2 h after its creation, when the judge holds that
 *   a charge would be listed; judgingPullWindow adds the clocks' allowance only when the check comes late): its
 *   report (reconciliation settled what it listed once). A pull made at its push's check covers the account's
 *   lost pushes created from SHARED_PULL_EXTRA_LEAD_MS before that push on and already past their own check
 *   (those due with it in the run);
 * - otherwise this payment's own pull.
 */
export class SharedPulls {
  private readonly last = new Map<string, { since: number; until: number; report: Promise<PullReport> }>();

  constructor(private readonly pull: ReconciliationPull) {}

  readonly shared: ReconciliationPull = async (merchantId: string, provider: Provider, since: Date, until: Date) => {
    const account = `${merchantId}:${provider}`;
    // since = creation − lead, so since + lead + check = the push's check time.
    const needed = Math.min(until.getTime(), since.getTime() + UNREPEATABLE_CREATION_PULL_LEAD_MS + UNREPEATABLE_CREATION_CHECK_AFTER_MS);
    for (;;) {
      const prev = this.last.get(account);
      if (!prev) break;
      try {
        const report = await prev.report;
        if (prev.since <= since.getTime() && prev.until >= needed) return report;
      } catch (err) {
        if (pullOutage(err)) throw err;
      }
      // Another check may have started a pull while this one waited: wait for that one instead.
      if (this.last.get(account) === prev) break;
    }
    // Never further back than the provider lists (the judge asks only for windows it still reaches).
    const start = new Date(Math.min(since.getTime(), Math.max(since.getTime() - SHARED_PULL_EXTRA_LEAD_MS, Date.now() - RECONCILE_MAX_WINDOW_MS)));
    const report = this.pull(merchantId, provider, start, until);
    this.last.set(account, { since: start.getTime(), until: until.getTime(), report });
    return report;
  };
}
