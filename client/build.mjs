/**
 * Builds the SDK package (`npm run build`, and `prepack` before `npm pack` / `npm publish`):
 *   dist/index.js   ESM bundle     dist/index.cjs   CommonJS bundle     dist/types/ (ESM), dist/types-cjs/ (CommonJS)   declarations
 * The contract (../contract) is bundled in, so the package depends on nothing of the service: only
 * zod and @ts-rest/core stay external (its dependencies). The contract's OpenAPI annotations
 * (@anatine/zod-openapi's extendApi) only feed the server's document: here they are the identity.
 * esbuild and typescript come from the repository's dev dependencies.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'dist');
const require = createRequire(import.meta.url);

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });

const openapiAnnotationsAreIdentity = {
  name: 'openapi-annotations-are-identity',
  setup(b) {
    b.onResolve({ filter: /^@anatine\/zod-openapi$/ }, () => ({ path: 'extend-api', namespace: 'sdk-shim' }));
    b.onLoad({ filter: /.*/, namespace: 'sdk-shim' }, () => ({ contents: 'export const extendApi = (schema) => schema;', loader: 'js' }));
  },
};

const common = {
  entryPoints: [path.join(here, 'index.ts')],
  bundle: true,
  platform: 'node',
  target: 'node18',
  external: ['zod', '@ts-rest/core'],
  plugins: [openapiAnnotationsAreIdentity],
  legalComments: 'none',
  logLevel: 'warning',
};
await build({ ...common, format: 'esm', outfile: path.join(dist, 'index.js') });
await build({ ...common, format: 'cjs', outfile: path.join(dist, 'index.cjs') });

// Declarations for the client and the contract types it exposes (dist/types/client, dist/types/contract).
const tsc = require.resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', path.join(here, 'tsconfig.build.json')], { stdio: 'inherit' });
// CommonJS consumers (`require` under module node16/nodenext) get the same declarations in a folder
// marked CommonJS: read from dist/types, which the package's "type": "module" makes ES modules, they
// are an ES module that CommonJS cannot require (TS1479 under node16).
cpSync(path.join(dist, 'types'), path.join(dist, 'types-cjs'), { recursive: true });
writeFileSync(path.join(dist, 'types-cjs', 'package.json'), '{ "type": "commonjs" }\n');
