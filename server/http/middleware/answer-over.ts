import type { Request, Response } from 'express';
import { awaitsItsHandler, whenEnded } from '../../net/answer-end.js';

/** The status reported for an answer its client left before the handler ended it (nginx's "client closed request"). */
export const CLIENT_CLOSED_REQUEST = 499;

export interface AnswerOver {
  /** The status the handler set, or CLIENT_CLOSED_REQUEST for an answer never ended. */
  status: number;
  /** The client hung up before the answer was sent. */
  aborted: boolean;
}

/**
 * Calls `done` once per request, when its answer is over: sent ('finish'), or its client hung up. Node
 * emits only 'close' for an answer ended after its socket closed (a payment whose client gave up while
 * its provider was called), and that 'close' comes as the client leaves, with the handler still at work.
 * An API handler always ends its answer, so it is reported when it does, with the status it set and the
 * time the work took; other answers are dropped with their client and reported as it leaves.
 */
export function onAnswerOver(req: Request, res: Response, done: (over: AnswerOver) => void): void {
  const api = awaitsItsHandler(req); // read now: routers rewrite req.url while they run
  let reported = false;
  const report = (aborted: boolean) => {
    if (reported) return;
    reported = true;
    done({ status: res.writableEnded ? res.statusCode : CLIENT_CLOSED_REQUEST, aborted });
  };
  res.once('finish', () => report(false));
  res.once('close', () => {
    if (reported) return;
    if (res.writableEnded || !api) report(true);
    else whenEnded(res, () => report(true));
  });
}
