import type http from 'node:http';

/**
 * The API's requests (`/v1/…`; read it before routers rewrite req.url): their handlers end their answer
 * even after the client hung up (ts-rest writes it when the handler returns, client or no client). Static
 * files and the simulators' held answers are dropped with their client and never ended.
 */
export const awaitsItsHandler = (req: http.IncomingMessage): boolean => req.url?.startsWith('/v1/') ?? false;

/**
 * Calls `fn` once, right after the handler ends (or destroys) `res`. Meant for an answer whose client has
 * gone: Node emits no 'finish' for an answer ended into a closed socket, so nothing else tells. Wrapped
 * only for these answers, and only now: the handler's res.json() (or an error handler's) ends it.
 */
export function whenEnded(res: http.ServerResponse, fn: () => void): void {
  let called = false;
  for (const method of ['end', 'destroy'] as const) {
    const original = res[method] as (...args: unknown[]) => http.ServerResponse;
    res[method] = ((...args: unknown[]) => {
      try {
        return original.apply(res, args);
      } finally {
        if (!called) {
          called = true;
          fn();
        }
      }
    }) as never;
  }
}
