/** interface.md "Limits": the pull API keeps 48 hours; automatic reconciliation pulls the last 2. */
export const RECONCILE_MAX_WINDOW_MS = 48 * 3_600_000;
export const AUTO_RECONCILE_WINDOW_MS = 2 * 3_600_000;
