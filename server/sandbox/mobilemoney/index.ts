import express, { type NextFunction, type Request, type Response } from 'express';
import { controlsGate, mountLossCountdown, outageSwitch } from '../controls.js';
import type { SandboxModule } from '../module.js';
import { CALLBACK_JOB, deliverCallback, type CallbackJobData } from './callbacks.js';
import { mountHeldResults } from './held-results.js';
import { mountListedRows } from './listed-rows.js';
import { misreport } from './misreport.js';
import { mountOauth } from './oauth.js';
import { mountPull } from './pull.js';
import { mountResults } from './results.js';
import { mountCertificate, prepareOperatorKeys } from './security-credential.js';
import { StalledRequests, mountStalledRequests } from './stalled-requests.js';
import { mountStk } from './stk.js';
import { operatorError } from './wire.js';

/**
 * The M-Pesa Daraja simulator at /sandbox/mobilemoney: OAuth, STK push and query, transaction status,
 * reversal and pull transactions, speaking the operator's wire protocol. Test values: test-values.ts.
 */

/** The operator's answer to a path it does not have. */
const unknownPath = (_req: Request, res: Response) => operatorError(res, '404.001.01', 'Resource not found');

export const mobilemoneySandbox: SandboxModule = {
  path: '/sandbox/mobilemoney',
  router(deps) {
    const router = express.Router();
    // SANDBOX_CONTROLS off: every /_control path answers as the unknown paths below do; on: JSON only.
    controlsGate(router, deps, unknownPath);
    outageSwitch(router, deps, 'mobilemoney', { requestId: 'sandbox-outage', errorCode: '500.003.1001', errorMessage: 'Internal Server Error' }, misreport);
    // The operator's next n asynchronous results (reversal and transaction-status results, queue-timeout
    // notices; not STK callbacks) are never sent (callbacks.ts), as when a result is lost on its way.
    mountLossCountdown(router, deps.em, 'mobilemoney', '/_control/lose-results', 'lose_results');
    // Or held, and sent when released (held-results.ts), as when a result arrives late.
    mountHeldResults<CallbackJobData>(router, deps, (job) => deliverCallback(deps, job));
    // The next n reversal and transaction-status requests are carried out and their acknowledgements
    // lost, the connection dropped (results.ts), as when the operator's answer never arrives in time.
    mountLossCountdown(router, deps.em, 'mobilemoney', '/_control/lose-answers', 'lose_answers', 'lost_answers');
    // The next n reversal requests get a queue-timeout notice and are carried out all the same, their result
    // sent after the notice (results.ts): a timeout notice is no final outcome.
    mountLossCountdown(router, deps.em, 'mobilemoney', '/_control/queue-timeouts', 'queue_timeouts', 'queue_timeouts');
    // The next n reversal requests are left unanswered until refuse-stalled turns them away (stalled-requests.ts).
    const stalled = new StalledRequests(deps);
    mountStalledRequests(router, deps, stalled);
    // Rows the pull lists besides the simulator's own payments (listed-rows.ts).
    mountListedRows(router, deps);
    mountCertificate(router, deps);
    mountOauth(router, deps);
    // Every API call below is POST with a JSON body.
    router.use(express.json({ limit: '100kb', type: ['application/json', 'application/*+json'] }));
    mountStk(router, deps);
    mountResults(router, deps, stalled);
    mountPull(router, deps);
    router.use(unknownPath);
    router.use((err: unknown, _req: Request, res: Response, next: NextFunction) => {
      // The operator's answer to a body that is not JSON (providers.md §3: 400.002.05).
      if ((err as { type?: string }).type === 'entity.parse.failed') return operatorError(res, '400.002.05', 'Invalid Request Payload');
      next(err);
    });
    return router;
  },
  async prepare(deps) {
    await prepareOperatorKeys(deps);
  },
  defineJobs(deps, define) {
    define<CallbackJobData>(CALLBACK_JOB, async (data) => {
      await deliverCallback(deps, data);
    });
  },
};
