/**
 * What happens after a failed scheduled attempt: with the schedule `[30s, 2m, 10m, 30m, 2h]` the
 * n-th failure (n = 1..5) waits schedule[n-1] before the next attempt, and the sixth is final.
 * Manual retries are not counted here: they never move the schedule.
 */
export type AfterFailure = { kind: 'retry'; delayMs: number } | { kind: 'dead' };

export function afterFailedAttempt(scheduleMs: readonly number[], failedScheduledAttempts: number): AfterFailure {
  const delayMs = failedScheduledAttempts >= 1 ? scheduleMs[failedScheduledAttempts - 1] : undefined;
  return delayMs === undefined ? { kind: 'dead' } : { kind: 'retry', delayMs };
}
