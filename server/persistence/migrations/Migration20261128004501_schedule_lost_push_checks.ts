import { Migration } from '@mikro-orm/migrations';

/**
 * Lost mobilemoney pushes from before the judging pull (pending, no provider_ref) were not scheduled for
 * it: one whose schedule ran out (next_sync_at null) or is due after its check would never be pulled.
 * Those a pull can still reach back to (created within the last 47 h: the operator lists 48 h, the pull
 * starts 30 min before the creation) are due at their check (2 h after creation, or now if that has
 * passed); an earlier due time is kept. The status sync judges them (lost-creation.ts).
 */
export class Migration20261128004501_schedule_lost_push_checks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`UPDATE payments
      SET next_sync_at = LEAST(coalesce(next_sync_at, 'infinity'), GREATEST(now(), created_at + interval '2 hours 1 minute'))
      WHERE provider = 'mobilemoney' AND status = 'pending' AND provider_ref IS NULL
        AND created_at > now() - interval '47 hours'
        AND (next_sync_at IS NULL OR next_sync_at > created_at + interval '2 hours 1 minute');`);
  }

  override async down(): Promise<void> {
    // Nothing to undo: only due times moved earlier, which the earlier release reads as it reads its own
    // (a pending payment due a re-check); the times they replaced are not kept and mean no more than these.
  }
}
