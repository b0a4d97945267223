import type { NextFunction, Request, RequestHandler, Response, Router } from 'express';
import express from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { HeldAnswers } from './held-answers.js';
import type { SandboxDeps } from './module.js';
import { mountMisreportControl, misreportResponse, type Misreport, type MisreportRewriter } from './misreport.js';

/**
 * A path of the test controls (`/_control/…`, relative to the simulator). Any case: Express matches
 * routes case-insensitively, so `/_CONTROL/outage` reaches the outage control.
 */
export function isControlPath(path: string): boolean {
  return /^\/_control/i.test(path);
}

/** A control's answer to a request that is not JSON (controlsGate). */
const CONTROL_TAKES_JSON = 'a test control takes a JSON request (Content-Type: application/json)';

/**
 * Whether the request says it is JSON. A web page can make a browser post a form, `text/plain` or no body
 * to any address it reaches (the developer's own loopback port too) without asking; a JSON request from
 * another origin needs a CORS preflight first, which nothing here answers, so the browser never sends it.
 */
function isJsonRequest(req: Request): boolean {
  return (req.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase() === 'application/json';
}

/**
 * The gate of every control path, mounted before the simulator's controls and routes:
 * - SANDBOX_CONTROLS off (by default under NODE_ENV=production): answered by `unknownPath`, the
 *   simulator's own answer to a path it does not have. The controls take no credentials and act on the
 *   provider for every merchant (an outage, lost answers), so on a deployment others reach they are not
 *   there unless the operator asks for them.
 * - on: a request that is not JSON is refused 415 (the controls' own `{error}` shape) and changes nothing;
 *   a JSON one has its body parsed here, for every control (the body is optional: `{}` without one). A
 *   parser the simulator mounts before this (cardpay's form parser) leaves a JSON body to this one.
 */
export function controlsGate(router: Router, deps: Pick<SandboxDeps, 'config'>, unknownPath: RequestHandler): void {
  const parseJson = express.json();
  router.use((req: Request, res: Response, next: NextFunction) => {
    if (!isControlPath(req.path)) return next();
    if (!deps.config.sandboxControls) return unknownPath(req, res, next);
    if (!isJsonRequest(req)) {
      res.status(415).json({ error: CONTROL_TAKES_JSON });
      return;
    }
    parseJson(req, res, next);
  });
}

/**
 * 'error' (500s) and 'hang' (no answer) fail every request of the provider. 'captures_error' and
 * 'captures_hang' fail its captures alone (a simulator with captures says which requests those are:
 * outageSwitch's `isCapture`), so a client that reads before it captures has its read answered and its
 * capture failed.
 */
export type OutageMode = 'ok' | 'error' | 'hang' | 'captures_error' | 'captures_hang';
const WHOLE_PROVIDER_MODES: readonly OutageMode[] = ['ok', 'error', 'hang'];
const CAPTURE_MODES: readonly OutageMode[] = ['captures_error', 'captures_hang'];

/** What the outage does to one request: answer 500 ('error'), never answer ('hang'), or nothing (null). */
function failureOf(mode: OutageMode, isCapture: boolean): 'error' | 'hang' | null {
  if (mode === 'error' || mode === 'hang') return mode;
  if (isCapture && mode === 'captures_error') return 'error';
  if (isCapture && mode === 'captures_hang') return 'hang';
  return null;
}

export async function outageMode(em: EntityManager, provider: string): Promise<OutageMode> {
  return (await controls(em, provider)).mode;
}

/** The provider's switches: outage mode and misreport. */
export interface Controls {
  mode: OutageMode;
  misreport: Misreport | null;
}

/** The columns of a `sandbox_controls` row aliased `c`, for a simulator that reads them with its own first statement. */
export const CONTROLS_COLUMNS = 'c.mode, c.misreport_amount, c.misreport_currency';
export interface ControlsRow {
  mode: OutageMode | null;
  misreport_amount: number | string | null;
  misreport_currency: string | null;
}

/** Switches from a row (none, or a left join that found none: everything normal). */
export function controlsOf(row: ControlsRow | undefined): Controls {
  if (!row?.mode) return { mode: 'ok', misreport: null };
  const misreport: Misreport = {
    ...(row.misreport_amount !== null ? { amount: row.misreport_amount } : {}),
    ...(row.misreport_currency !== null ? { currency: row.misreport_currency } : {}),
  };
  return { mode: row.mode, misreport: Object.keys(misreport).length > 0 ? misreport : null };
}

/** The provider's switches, in one query per simulator request. */
async function controls(em: EntityManager, provider: string): Promise<Controls> {
  const rows = await em.getConnection().execute<ControlsRow[]>(`SELECT ${CONTROLS_COLUMNS} FROM sandbox_controls c WHERE c.provider = ?`, [provider]);
  return controlsOf(rows[0]);
}

/**
 * Applies the switches to one request (`isCapture`: it is a capture): a misreport rewrites its answer; an
 * outage answers 500 or never answers (until the client gives up). True when the request goes on to the simulator.
 */
export function applyControls(res: Response, switches: Controls, errorBody: unknown, held: HeldAnswers, misreport?: MisreportRewriter, isCapture = false): boolean {
  if (switches.misreport && misreport) misreportResponse(res, switches.misreport, misreport);
  const failure = failureOf(switches.mode, isCapture);
  if (failure === 'error') {
    res.status(500).json(errorBody);
    return false;
  }
  if (failure === 'hang') {
    held.hold(res);
    return false;
  }
  return true;
}

/** The misreport switch alone, for answers a simulator sends later (asynchronous results). */
export async function currentMisreport(em: EntityManager, provider: string): Promise<Misreport | null> {
  return (await controls(em, provider)).misreport;
}

export async function setOutageMode(em: EntityManager, provider: string, mode: OutageMode): Promise<void> {
  await em.getConnection().execute(
    `INSERT INTO sandbox_controls (provider, mode) VALUES (?, ?)
     ON CONFLICT (provider) DO UPDATE SET mode = EXCLUDED.mode, updated_at = now()`,
    [provider, mode],
  );
}

/**
 * Mounts `POST /_control/outage {mode: ok|error|hang}` (`withCaptures`: also captures_error|captures_hang)
 * and, with `misreport` (the simulator's rewriter), `POST /_control/misreport` (see misreport.ts). The
 * state is in PostgreSQL, so it holds for every process.
 */
export function mountControls(router: Router, em: EntityManager, provider: string, misreport?: MisreportRewriter, withCaptures = false): void {
  if (misreport) mountMisreportControl(router, em, provider);
  const modes = withCaptures ? [...WHOLE_PROVIDER_MODES, ...CAPTURE_MODES] : WHOLE_PROVIDER_MODES;
  router.post('/_control/outage', async (req: Request, res: Response, next: NextFunction) => {
    try {
      const mode = (req.body as { mode?: string } | undefined)?.mode;
      if (!modes.includes(mode as OutageMode)) {
        res.status(400).json({ error: `mode must be ${modes.slice(0, -1).join(', ')} or ${modes.at(-1)}` });
        return;
      }
      await setOutageMode(em, provider, mode as OutageMode);
      res.json({ provider, mode });
    } catch (err) {
      next(err);
    }
  });
}

/**
 * The control routes (mountControls) and a middleware that applies the switches to every other request
 * of the simulator (applyControls). Mount it before the simulator's routes. `isCapture`, for a simulator
 * with captures, names its capture requests and enables the capture-only modes.
 */
export function outageSwitch(
  router: Router, deps: SandboxDeps, provider: string, errorBody: unknown, misreport?: MisreportRewriter, isCapture?: (req: Request) => boolean,
): void {
  const { em, heldAnswers } = deps;
  mountControls(router, em, provider, misreport, Boolean(isCapture));
  router.use(async (req: Request, res: Response, next: NextFunction) => {
    if (isControlPath(req.path)) return next();
    try {
      if (applyControls(res, await controls(em, provider), errorBody, heldAnswers, misreport, isCapture?.(req) ?? false)) next();
    } catch (err) {
      next(err);
    }
  });
}

/** The countdowns of sandbox_controls: lost (never sent) and held (sent when released) results, lost answers, stalled requests, queue timeouts followed by a result. */
export type Countdown = 'lost_results' | 'held_results' | 'lost_answers' | 'stalled_requests' | 'queue_timeouts';

/**
 * `POST <path> {"count": n}`: the simulator loses the next n of something on purpose (what, the
 * simulator says where it mounts this and calls `takeLoss`), to rehearse what recovers it; `{"count": 0}`
 * switches it off. Counted down in PostgreSQL (sandbox_controls.lost_results, or another `column`), so it
 * holds for every process.
 */
export function mountLossCountdown(router: Router, em: EntityManager, provider: string, path: string, answerKey: string, column: Countdown = 'lost_results'): void {
  router.post(path, async (req: Request, res: Response, next: NextFunction) => {
    try {
      const count = (req.body as { count?: unknown } | undefined)?.count;
      if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) {
        res.status(400).json({ error: 'count must be a whole number, 0 or more' });
        return;
      }
      await em.getConnection().execute(
        `INSERT INTO sandbox_controls (provider, mode, ${column}) VALUES (?, 'ok', ?)
         ON CONFLICT (provider) DO UPDATE SET ${column} = EXCLUDED.${column}, updated_at = now()`,
        [provider, count],
      );
      res.json({ provider, [answerKey]: count });
    } catch (err) {
      next(err);
    }
  });
}

/** Whether this one is to be lost (mountLossCountdown; or held, by `column`), counting it; `run` is the simulator's own query runner (`?` placeholders). */
export async function takeLoss(run: (sql: string, params: unknown[]) => Promise<unknown[]>, provider: string, column: Countdown = 'lost_results'): Promise<boolean> {
  const rows = await run(`UPDATE sandbox_controls SET ${column} = ${column} - 1 WHERE provider = ? AND ${column} > 0 RETURNING 1`, [provider]);
  return rows.length > 0;
}

/**
 * SANDBOX_LATENCY_MS: every simulator request is handled at once but answered only after `ms`, like a
 * provider behind a slow network (the provider has acted; its answer is still on the way). Control
 * routes answer at once. A timer, not a held connection: the simulator's state is already committed.
 */
export function withLatency(router: Router, ms: number): Router {
  if (ms <= 0) return router;
  const outer = express.Router();
  outer.use((req: Request, res: Response, next: NextFunction) => {
    if (isControlPath(req.path)) return next();
    const end = res.end.bind(res) as (...args: unknown[]) => Response;
    res.end = ((...args: unknown[]) => {
      const timer = setTimeout(() => end(...args), ms);
      res.once('close', () => clearTimeout(timer));
      return res;
    }) as Response['end'];
    next();
  });
  outer.use(router);
  return outer;
}
