import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase } from '../support/database.js';
import { baseEnv, freePort, startProcess, stopAllProcesses, type ServiceProcess } from '../support/processes.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { eventually } from '../support/webhook-receiver.js';

// Through a pooler in transaction mode a LISTEN registers on whichever server connection ran it, and no
// notification reaches the process: a revoked key keeps working from the cache for a minute, silently.
// The relay here drops every notification, as such a pooler does in effect; the process must say so.

const DEAF = 'did not hear its own NOTIFY';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let proxy: TcpProxy;
let deaf: ServiceProcess;
let direct: ServiceProcess;
let directListening = 0;

async function startApi(databaseUrl: string, name: string): Promise<ServiceProcess> {
  const port = await freePort();
  return startProcess('api', baseEnv(databaseUrl, `http://127.0.0.1:${port}`, { PORT: String(port) }), { name });
}

/** The error lines a process logged about a LISTEN that hears nothing. */
function deafErrors(process: ServiceProcess): Array<{ level: number; msg: string }> {
  return readFileSync(process.logFile, 'utf8')
    .split('\n')
    .filter((line) => line.includes(DEAF))
    .map((line) => JSON.parse(line) as { level: number; msg: string });
}

beforeAll(async () => {
  db = await createTestDatabase();
  const { hostname, port } = new URL(db.url);
  proxy = new TcpProxy({ host: hostname, port: Number(port || 5432) }, { dropNotifications: true });
  deaf = await startApi(await proxy.start(db.url), 'deaf');
  direct = await startApi(db.url, 'direct');
  directListening = Date.now();
}, 120_000);

afterAll(async () => {
  await stopAllProcesses();
  await proxy?.stop();
  await db?.drop();
}, 60_000);

describe('a LISTEN connection that hears nothing', () => {
  it('is reported as an error naming the likely cause; a direct connection reports nothing', async () => {
    // Each LISTEN connection says it: access changes', and Agenda's wake-ups' (jobs due now then wait for the poll).
    const errors = await eventually(() => (deafErrors(deaf).length >= 2 ? deafErrors(deaf) : null), 30_000, 'the deaf listeners reported');
    for (const channel of ['access_changed', 'agenda:jobs']) {
      const error = errors.find((e) => e.msg.includes(`LISTEN ${channel} `));
      expect(error?.level).toBe(50);
      expect(error?.msg).toContain('pooler in transaction mode');
    }

    // The direct process listened before it was ready: once as long has passed as the deaf one took to
    // say so (and a margin), it has heard itself.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, directListening + 8_000 - Date.now())));
    expect(deafErrors(direct)).toEqual([]);
  }, 60_000);
});
