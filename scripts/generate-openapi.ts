/** Writes openapi.json from the contract; `--check` fails when the committed file is stale. */
import { readFile, writeFile } from 'node:fs/promises';
import { openApiDocument } from '../server/http/openapi.js';

const text = `${JSON.stringify(openApiDocument(), null, 2)}\n`;
if (process.argv.includes('--check')) {
  const committed = await readFile('openapi.json', 'utf8').catch(() => '');
  if (committed !== text) {
    process.stderr.write('openapi.json is stale: run `npm run openapi` and commit the result\n');
    process.exit(1);
  }
  process.stdout.write('openapi.json is current\n');
} else {
  await writeFile('openapi.json', text);
  process.stdout.write('wrote openapi.json\n');
}
