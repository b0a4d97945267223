/** How a step bounded by `withinDeadline` ended. */
export type StepOutcome = 'done' | 'failed' | 'late';

/**
 * Waits for `work` until `deadline` (ms since the epoch; Infinity: none) at most: a shutdown step that would outlive the
 * shutdown's budget is left behind ('late'; the process exits without it) instead of holding every later
 * step, and main.ts's deadline, hostage. A step that fails is 'failed', never a rejection.
 */
export async function withinDeadline(work: Promise<unknown>, deadline: number): Promise<StepOutcome> {
  const settled = work.then(() => 'done' as const, () => 'failed' as const);
  // No deadline (a close outside a stop): waited for, however long (a timer of Infinity would fire at once).
  if (!Number.isFinite(deadline)) return settled;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), Math.max(0, deadline - Date.now()))));
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
  }
}
