import http from 'node:http';
import { performance } from 'node:perf_hooks';

export interface HttpResponse {
  status: number;
  body: string;
}

export interface HttpRequest {
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/**
 * A keep-alive HTTP/1.1 client for one loopback origin (node:http: far cheaper per request than
 * fetch, which matters when the load generator shares two cores with what it measures).
 */
export class LoopbackClient {
  private readonly agent: http.Agent;
  private readonly host: string;
  private readonly port: number;

  constructor(baseUrl: string, maxSockets = 64) {
    const url = new URL(baseUrl);
    if (url.hostname !== '127.0.0.1') throw new Error(`benchmarks only send traffic to 127.0.0.1, not ${url.hostname}`);
    this.host = url.hostname;
    this.port = Number(url.port);
    // Idle sockets are dropped after 4 s, before the server's 5 s keep-alive timeout closes them:
    // otherwise a request can be written to a socket the server is closing (ECONNRESET).
    this.agent = new http.Agent({ keepAlive: true, maxSockets, timeout: 4000 });
  }

  request(req: HttpRequest, timeoutMs = 30_000): Promise<HttpResponse> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = { ...req.headers };
      if (req.body !== undefined) {
        headers['content-type'] ??= 'application/json';
        headers['content-length'] = Buffer.byteLength(req.body);
      }
      const r = http.request({ host: this.host, port: this.port, method: req.method, path: req.path, headers, agent: this.agent, timeout: timeoutMs }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      r.on('timeout', () => r.destroy(new Error('request timed out')));
      r.on('error', reject);
      if (req.body !== undefined) r.write(req.body);
      r.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

export interface LoadResult {
  /** Latency of every request that finished inside the measured window, in ms. */
  latenciesMs: number[];
  ok: number;
  failed: number;
  statuses: Record<string, number>;
  elapsedMs: number;
  requestsPerSecond: number;
  /** The first few failure descriptions (status + body excerpt), for the report. */
  failures: string[];
}

/**
 * Closed-loop load: `concurrency` workers each send one request at a time until `maxRequests` have been
 * sent or `maxDurationMs` has passed (whichever comes first). A request counts as ok when `isOk` says so.
 */
export async function closedLoop(options: {
  concurrency: number;
  maxRequests: number;
  maxDurationMs: number;
  send: (i: number) => Promise<HttpResponse>;
  isOk?: (res: HttpResponse) => boolean;
}): Promise<LoadResult> {
  const isOk = options.isOk ?? ((res) => res.status >= 200 && res.status < 300);
  const latenciesMs: number[] = [];
  const statuses: Record<string, number> = {};
  const failures: string[] = [];
  let issued = 0;
  let ok = 0;
  let failed = 0;
  const start = performance.now();
  const deadline = start + options.maxDurationMs;
  const worker = async () => {
    while (issued < options.maxRequests && performance.now() < deadline) {
      const i = issued++;
      const t0 = performance.now();
      let status = 'error';
      try {
        const res = await options.send(i);
        status = String(res.status);
        if (isOk(res)) ok += 1;
        else {
          failed += 1;
          if (failures.length < 5) failures.push(`${res.status} ${res.body.slice(0, 200)}`);
        }
      } catch (err) {
        failed += 1;
        if (failures.length < 5) failures.push((err as Error).message);
      }
      latenciesMs.push(performance.now() - t0);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  const elapsedMs = performance.now() - start;
  return { latenciesMs, ok, failed, statuses, elapsedMs, requestsPerSecond: (ok / elapsedMs) * 1000, failures };
}
