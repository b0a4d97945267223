/** interface.md "Limits": the pull API keeps 48 hours; automatic reconciliation pulls the last 2. */
export const RECONCILE_MAX_WINDOW_MS = 48 * 3_600_000;
export const AUTO_RECONCILE_WINDOW_MS = 2 * 3_600_000;
/**
 * How far a merchant's reconcile window may reach past the pull's reach — before now − 48 h (`since`), after
 * now (`until`) — for the difference between the client's clock and ours; beyond it the window is refused
 * (422), never silently cut. A minute: a client that sends "48 hours ago" a little late, or "now" by a clock
 * a little ahead, is served.
 */
export const RECONCILE_CLOCK_SKEW_MS = 60_000;
