import type { NextFunction, Request, Response, Router } from 'express';
import { mountLossCountdown, takeLoss } from '../controls.js';
import type { SandboxDeps } from '../module.js';
import { operatorError } from './wire.js';

/**
 * Slow requests the operator then turns away: `POST /_control/stall-requests {"count": n}` leaves the
 * next n reversal requests unanswered (not carried out); `POST /_control/refuse-stalled` answers every
 * stalled one with the operator's spike-arrest refusal (500.003.02) and says how many. Meanwhile other
 * requests are answered as usual, so a test can make one request slow while another is answered. The
 * count is in PostgreSQL (sandbox_controls.stalled_requests); the stalled connections are the process's
 * own, like a hang's (a stop or HANG_MS ends them).
 */
export class StalledRequests {
  private readonly open = new Set<Response>();

  constructor(private readonly deps: SandboxDeps) {}

  /** Whether this request is to be stalled (counting it); if so it is kept unanswered. */
  async stall(res: Response): Promise<boolean> {
    if (!(await takeLoss((sql, params) => this.deps.em.getConnection().execute(sql, params), 'mobilemoney', 'stalled_requests'))) return false;
    this.deps.heldAnswers.hold(res);
    this.open.add(res);
    res.on('close', () => this.open.delete(res));
    this.deps.logger.info({ provider: 'mobilemoney' }, 'sandbox request stalled on purpose (stall-requests control)');
    return true;
  }

  refuseAll(): number {
    const stalled = [...this.open];
    this.open.clear();
    for (const res of stalled) operatorError(res, '500.003.02', 'Spike arrest violation');
    return stalled.length;
  }
}

export function mountStalledRequests(router: Router, deps: SandboxDeps, stalled: StalledRequests): void {
  mountLossCountdown(router, deps.em, 'mobilemoney', '/_control/stall-requests', 'stall_requests', 'stalled_requests');
  router.post('/_control/refuse-stalled', (_req: Request, res: Response, next: NextFunction) => {
    try {
      res.json({ provider: 'mobilemoney', refused: stalled.refuseAll() });
    } catch (err) {
      next(err);
    }
  });
}
