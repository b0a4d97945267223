import { readFileSync } from 'node:fs';
import http from 'node:http';
import { describe, expect, it } from '@jest/globals';
import { baseEnv, databaseForProcesses, startProcess } from '../support/processes.js';

/**
 * SHUTDOWN_DELAY_MS: on Kubernetes a pod's endpoint removal races its SIGTERM, so connections keep
 * arriving for a moment after the signal. With the delay the process keeps listening and answers
 * /readyz 503 (draining) to them instead of refusing them, then stops as before.
 */

const db = databaseForProcesses();

/** GET on a connection of its own (no keep-alive pool): what a probe or a balancer's new connection sees. */
function freshGet(url: string): Promise<{ status: number; body: string } | { refused: string }> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ refused: err.code ?? err.message }));
  });
}

describe('SHUTDOWN_DELAY_MS', () => {
  it('keeps answering new connections after SIGTERM, /readyz 503 draining, then exits 0', async () => {
    const api = await startProcess('api', baseEnv(db.url, 'http://127.0.0.1:9', { SHUTDOWN_DELAY_MS: '1500' }));
    expect(await freshGet(`${api.url}/readyz`)).toMatchObject({ status: 200 });
    process.kill(api.pid, 'SIGTERM');
    // Once the process has begun its stop (it logs so), a new connection: answered, not refused.
    for (let i = 0; !readFileSync(api.logFile, 'utf8').includes('shutting down'); i++) {
      expect(i).toBeLessThan(500);
      await new Promise((r) => setTimeout(r, 10));
    }
    const answer = await freshGet(`${api.url}/readyz`);
    expect(answer).toMatchObject({ status: 503 });
    expect(JSON.parse((answer as { body: string }).body)).toMatchObject({ success: false, data: { status: 'draining' } });
    expect(await api.exited).toBe(0);
    expect(await freshGet(`${api.url}/readyz`)).toHaveProperty('refused');
  }, 60_000);
});
