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

/** What a shutdown step reports through: the service's logger (pino's call shape). */
export interface StepLogger {
  error(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * A shutdown's step runner: each step waits until `deadline` at most (withinDeadline); one that would outlive
 * it is logged at error and left behind (the process exits without it), one that fails is logged at warn, and
 * the others still run. Shared by the stop (service.ts) and the container's close.
 */
export function deadlineSteps(logger: StepLogger, deadline: number): (name: string, work: () => Promise<unknown>) => Promise<void> {
  return async (name, work) => {
    const outcome = await withinDeadline(Promise.resolve().then(work), deadline);
    if (outcome === 'late') logger.error({ step: name }, `shutdown: ${name} did not close within SHUTDOWN_TIMEOUT_MS; left open`);
    if (outcome === 'failed') logger.warn({ step: name }, `shutdown: ${name} failed`);
  };
}
