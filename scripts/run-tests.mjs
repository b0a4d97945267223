#!/usr/bin/env node
/**
 * `npm test`: runs jest against a real PostgreSQL. Uses TEST_DATABASE_URL (or DATABASE_URL) when given —
 * each test file creates and drops its own database on that server — otherwise starts an embedded
 * PostgreSQL in a temporary directory for the run. Extra arguments go to jest.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

const env = { ...process.env };
let embedded = null;
let tempDir = null;
if (!env.TEST_DATABASE_URL && env.DATABASE_URL) env.TEST_DATABASE_URL = env.DATABASE_URL;
if (!env.TEST_DATABASE_URL) {
  // The service's own embedded cluster (server/persistence/embedded-postgres.ts), loaded through tsx.
  const { tsImport } = await import('tsx/esm/api');
  const { startEmbeddedPostgres } = await tsImport('../server/persistence/embedded-postgres.ts', import.meta.url);
  tempDir = await mkdtemp(path.join(os.tmpdir(), 'payments-test-pg-'));
  // Ours to open: as root the server runs as the postgres OS user, which must enter it.
  await chmod(tempDir, 0o755);
  embedded = await startEmbeddedPostgres(path.join(tempDir, 'cluster'), {
    database: 'postgres',
    settings: { max_connections: '400', fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' },
    log: (line) => process.stdout.write(`${line}\n`),
  });
  env.TEST_DATABASE_URL = embedded.url;
  process.stdout.write(`embedded PostgreSQL for tests on ${new URL(embedded.url).host}\n`);
}
delete env.DATABASE_URL;

// One database migrated once per run, as the migrate command does it, with the simulators' key pairs
// made in it (scripts/prepare-test-template.ts); each test file's database is a copy of it (CREATE
// DATABASE … TEMPLATE, test/support/database.ts), so a test service boots without applying every
// migration again or generating two RSA keys. Tests about migrations ask for an empty database instead.
const template = `payments_test_template_${process.pid}`;
await adminQuery(`DROP DATABASE IF EXISTS ${template}`);
await adminQuery(`CREATE DATABASE ${template}`);
// Meanwhile the server code is compiled once, as `npm run build` does (tsc, incremental: a rerun
// recompiles only what changed), into test-results/build: the service processes and command-line tools
// the tests start run it with plain `node`, as production does, instead of each loading every module
// through tsx (~0.9 s of CPU more per start, some 300 starts a run on a CPU-bound machine).
const buildDir = path.resolve('test-results', 'build');
const [prepared, built] = await Promise.all([
  prepareTemplate({ ...env, DATABASE_URL: withDatabase(env.TEST_DATABASE_URL, template), NODE_ENV: 'test' }),
  run(process.execPath, [path.resolve('node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json', '--outDir', buildDir, '--sourceMap', 'false',
    // The build info lives inside the build: removing the folder removes both, so tsc never skips an emit
    // into a folder that is gone (an incremental build trusts its build info, not the files).
    '--incremental', '--tsBuildInfoFile', path.join(buildDir, '.tsbuildinfo')], env),
]);
if (prepared.code !== 0) {
  process.stdout.write(`preparing the template database (migrations, simulator keys) failed:\n${prepared.output}\n`);
  process.exit(1);
}
if (built.code !== 0) {
  process.stdout.write(`compiling the server code failed:\n${built.output}\n`);
  process.exit(1);
}
env.TEST_TEMPLATE_DATABASE = template;
env.TEST_SERVER_BUILD = buildDir;

env.NODE_OPTIONS = `${env.NODE_OPTIONS ?? ''} --experimental-vm-modules --no-warnings`.trim();

const jestBin = path.resolve('node_modules', 'jest', 'bin', 'jest.js');
// Every service a test starts logs under test-results/logs; start the run with none, so the secret
// scan below reads exactly this run's logs.
const logDir = path.resolve('test-results', 'logs');
await rm(logDir, { recursive: true, force: true });
// Which test file made which database (test/support/database.ts); the logs are named by database.
const databasesIndex = path.resolve('test-results', 'test-databases.tsv');
await rm(databasesIndex, { force: true });

const summaryFile = path.resolve('test-results', `jest-summary-${process.pid}.json`);
await mkdir(path.dirname(summaryFile), { recursive: true });
await rm(summaryFile, { force: true });
const child = spawn(process.execPath, [jestBin, '--json', `--outputFile=${summaryFile}`, ...process.argv.slice(2)], { stdio: 'inherit', env });
const code = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
// The plain closing line CI reads: "N passed, N failed, N skipped, N todo". A skipped or todo test is a
// test that proves nothing while the run looks green: it fails the run, unless the run itself picked
// tests by name (-t), which jest reports as skipped.
const namePicked = process.argv.slice(2).some((a) => a === '-t' || a.startsWith('--testNamePattern') || a.startsWith('-t='));
let failedFiles = [];
let unrunTests = 0;
try {
  const summary = JSON.parse(await readFile(summaryFile, 'utf8'));
  process.stdout.write(`\njest: ${summary.numPassedTests} passed, ${summary.numFailedTests} failed, ${summary.numPendingTests} skipped, ${summary.numTodoTests} todo\n`);
  failedFiles = summary.testResults.filter((r) => r.status === 'failed').map((r) => path.relative(process.cwd(), r.name));
  if (!namePicked) {
    const unrun = summary.testResults.flatMap((r) => r.assertionResults
      .filter((a) => a.status !== 'passed' && a.status !== 'failed')
      .map((a) => `  ${a.status === 'pending' ? 'skipped' : a.status}: ${path.relative(process.cwd(), r.name)} › ${a.fullName}`));
    unrunTests = summary.numPendingTests + summary.numTodoTests;
    if (unrunTests > 0) process.stdout.write(`skipped or todo tests fail the run:\n${unrun.slice(0, 20).join('\n')}\n`);
  }
  await reportSlowestFiles(summary.testResults);
} catch {
  process.stdout.write('\njest: 0 passed, 1 failed\n');
}
await rm(summaryFile, { force: true });

// The logs of the whole run must hold no credential: API keys, webhook signing secrets, provider
// secret keys or the sandbox passkey. Any hit fails the run.
const SECRET_PATTERNS = [/pk_[A-Za-z0-9_-]{43}/, /whsec_[A-Za-z0-9_+/-]{16,}/, /\b[sr]k_(test|live)_[A-Za-z0-9_]{4,}/, /bfb279f9aa9bdbcf158e97dd71a467cd/];
// Nor any stack trace (a frame line, raw or inside a JSON string): a log says where an error was thrown, not how it got there.
const STACK_TRACE = /(^|\\n|")\s+at \S.*:\d+:\d+\)?/m;
// An error-level 'job failed' (server/jobs/define-job.ts) is a job run that threw: reported, not failing the run
// (some tests make jobs fail on purpose), so a job failing where no test meant it to is seen.
let leaks = 0;
let traces = 0;
let scanned = 0;
let jobFailures = 0;
const jobFailureFiles = [];
for (const name of await readdir(logDir).catch(() => [])) {
  const text = await readFile(path.join(logDir, name), 'utf8').catch(() => '');
  scanned += 1;
  const failedRuns = jobFailedCount(text);
  if (failedRuns > 0) {
    jobFailures += failedRuns;
    jobFailureFiles.push(`${name} (${failedRuns})`);
  }
  if (STACK_TRACE.test(text)) {
    traces += 1;
    process.stdout.write(`stack trace in test-results/logs/${name}\n`);
  }
  for (const pattern of SECRET_PATTERNS) {
    if (pattern.test(text)) {
      leaks += 1;
      process.stdout.write(`secret-like value matching ${pattern} in test-results/logs/${name}\n`);
    }
  }
}
process.stdout.write(`log scan: ${scanned} service log files, ${leaks} with secrets, ${traces} with stack traces, ${jobFailures} 'job failed' errors in ${jobFailureFiles.length} files\n`);
if (jobFailureFiles.length > 0) {
  process.stdout.write(`'job failed' errors in test-results/logs: ${jobFailureFiles.slice(0, 5).join(', ')}${jobFailureFiles.length > 5 ? ', …' : ''}\n`);
}
if (failedFiles.length > 0) await printFailureLogs(failedFiles);
const exitCode = code === 0 && leaks + traces + unrunTests > 0 ? 1 : code;
await adminQuery(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`).catch(() => {});
if (embedded) {
  await embedded.stop().catch(() => {});
  if (tempDir) await rm(tempDir, { recursive: true, force: true }).catch(() => {});
}
process.exit(exitCode);

/**
 * The slowest test files of the run, and every file's seconds in test-results/test-durations.json (the
 * shape of test/support/test-durations.json, which orders the next runs: copy it there after a full run).
 */
function reportSlowestFiles(results) {
  const seconds = Object.fromEntries(
    results
      .map((r) => [path.relative(process.cwd(), r.name), Math.round((r.endTime - r.startTime) / 100) / 10])
      .sort((a, b) => b[1] - a[1]),
  );
  const entries = Object.entries(seconds);
  if (entries.length < 2) return undefined;
  const total = entries.reduce((sum, [, s]) => sum + s, 0);
  process.stdout.write(`slowest test files (of ${entries.length}, ${Math.round(total)} s in all):\n`);
  for (const [file, s] of entries.slice(0, 12)) process.stdout.write(`  ${String(s).padStart(6)} s  ${file}\n`);
  return writeFile(path.resolve('test-results', 'test-durations.json'), `${JSON.stringify(seconds, null, 2)}\n`).catch(() => undefined);
}

/**
 * What the services of each failed test file logged that says what went wrong: warnings, errors, and
 * requests answered 5xx or slowly. CI keeps only this output, so a failure's cause is read here rather
 * than in logs deleted with the checkout. A line with a secret-like value is withheld.
 */
async function printFailureLogs(files) {
  const index = await readFile(databasesIndex, 'utf8').catch(() => '');
  const logs = (await readdir(logDir).catch(() => [])).sort();
  for (const file of files) {
    const databases = index.split('\n').filter((l) => l.endsWith(`\t${file}`)).map((l) => l.split('\t')[0]);
    const lines = [];
    for (const name of logs) {
      const db = databases.find((d) => name.startsWith(d));
      if (!db) continue;
      // startTestService's log is `<db>.log`; a spawned process's `<db>-<name>-….log`.
      const source = name.slice(db.length).replace(/^-/, '').replace(/\.log$/, '') || 'service';
      for (const line of (await readFile(path.join(logDir, name), 'utf8').catch(() => '')).split('\n')) {
        const entry = telling(line);
        if (entry) lines.push(`  ${source} ${entry}`);
      }
    }
    process.stdout.write(`\nservice logs of ${file}: ${lines.length} warning, error, 5xx or slow lines${lines.length > 60 ? ' (the last 60)' : ''}\n`);
    for (const line of lines.slice(-60)) process.stdout.write(`${line}\n`);
  }
}

/** How many error-level 'job failed' lines (a job run that threw) a service log holds. */
function jobFailedCount(text) {
  let count = 0;
  for (const line of text.split('\n')) {
    if (!line.includes('"job failed"')) continue;
    try {
      const entry = JSON.parse(line);
      if (entry.msg === 'job failed' && entry.level >= 50) count += 1;
    } catch {
      // not a JSON line
    }
  }
  return count;
}

/** A log line worth reading after a failure, shortened; null for the rest. */
function telling(line) {
  let entry;
  try {
    entry = JSON.parse(line);
  } catch {
    return null;
  }
  const slowOrFailed = entry.msg === 'request' && (Number(entry.status) >= 500 || entry.ms >= 1000);
  if (!(entry.level >= 40 || slowOrFailed)) return null;
  if (SECRET_PATTERNS.some((p) => p.test(line))) return '(line withheld: a secret-like value)';
  const { level, time, msg, service, hostname, pid, ...rest } = entry;
  const text = `${new Date(time).toISOString().slice(11, 23)} ${level >= 50 ? 'ERROR' : level >= 40 ? 'WARN' : 'info'} ${msg} ${JSON.stringify(rest)}`;
  return text.length > 400 ? `${text.slice(0, 400)}…` : text;
}

/** One statement on the test server's admin database. */
async function adminQuery(text) {
  const client = new pg.Client({ connectionString: env.TEST_DATABASE_URL });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

function withDatabase(url, name) {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

/** The template database migrated, then given the simulators' keys: the exit code and output of the first step that failed, or the last. */
async function prepareTemplate(childEnv) {
  const migrated = await run(process.execPath, ['--import', 'tsx', 'server/migrate.ts'], childEnv);
  if (migrated.code !== 0) return migrated;
  return run(process.execPath, ['--import', 'tsx', 'scripts/prepare-test-template.ts'], childEnv);
}

/** A command's exit code and its output together. */
function run(command, args, childEnv) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('exit', (c) => resolve({ code: c ?? 1, output }));
  });
}
