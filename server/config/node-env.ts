import { ConfigError } from './config.js';

/**
 * The compiled server (dist/: `node dist/server/main.js`, a process manager, the image) refuses to boot
 * with NODE_ENV unset. Unset means development, whose simulators take every provider call, live
 * credentials' too, and complete payments with no money moved: a unit file or shell that forgot the
 * variable must not run a deployment that way. `npm run start:prod` sets production when it is unset;
 * `npm start` (the sources, under tsx) keeps development as its default.
 * `entryUrl`: the entry module's import.meta.url (`.js` only when compiled).
 */
export function requireNodeEnvOfBuild(env: NodeJS.ProcessEnv, entryUrl: string): void {
  if (!entryUrl.endsWith('.js') || (env.NODE_ENV ?? '') !== '') return;
  throw new ConfigError(
    'NODE_ENV is not set: the compiled server does not default to development, whose simulators take every provider call (live credentials too) and complete payments with no money moved. Set NODE_ENV=production for live payments, or NODE_ENV=development to run on the simulators',
  );
}
