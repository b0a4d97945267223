/**
 * `npm test` (scripts/run-tests.mjs) runs this once on its migrated template database: the simulators'
 * key pairs and certificates are made there, as a booting service makes them (each SandboxModule's
 * `prepare`), so every test database copied from the template has them instead of generating two
 * 2048-bit RSA keys at each service's boot. test/sandbox/simulator-keys.test.ts removes them to prove
 * a boot on a database without keys still makes them.
 */
import { openOrm } from '../server/persistence/orm.js';
import { sandboxModules } from '../server/sandbox/index.js';

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error('DATABASE_URL is not set');
const orm = await openOrm(databaseUrl, 2);
try {
  await Promise.all(sandboxModules.map((m) => m.prepare?.({ em: orm.em.fork() })));
} finally {
  await orm.close(true);
}
