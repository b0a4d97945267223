import net from 'node:net';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { baseEnv, databaseForProcesses, startProcess } from '../support/processes.js';

/**
 * SIGTERM always ends the process. A graceful stop waits for requests under way; a client that never
 * finishes its request would hold it open for minutes (Node's request timeout). SHUTDOWN_TIMEOUT_MS
 * bounds the wait: the process then exits with code 1 and says why.
 */

const db = databaseForProcesses();

describe('graceful shutdown', () => {
  it('exits within SHUTDOWN_TIMEOUT_MS after SIGTERM although a request never completes', async () => {
    // A provider timeout the 2 s stop covers (the process refuses a stop shorter than one provider call).
    const api = await startProcess('api', baseEnv(db.url, 'http://127.0.0.1:9', { SHUTDOWN_TIMEOUT_MS: '2000', PROVIDER_TIMEOUT_MS: '1500' }));
    // A request whose body never arrives: the server keeps it open, waiting for the rest. A provider
    // callback (no API key: an anonymous merchant request is answered 401 before its body is read).
    const socket = net.connect(Number(new URL(api.url!).port), '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.on('error', () => undefined);
    socket.write('POST /v1/webhooks/cardpay HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"id":');
    await new Promise((r) => setTimeout(r, 300));

    const started = Date.now();
    await api.kill('SIGTERM');
    const code = await api.exited;
    const elapsed = Date.now() - started;
    socket.destroy();

    expect(code).toBe(1);
    expect(elapsed).toBeGreaterThanOrEqual(1900);
    expect(elapsed).toBeLessThan(10_000);
    expect(readFileSync(api.logFile, 'utf8')).toContain('graceful shutdown timed out');
  }, 60_000);
});
