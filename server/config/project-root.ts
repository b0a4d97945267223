import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder holding package.json: the repository when run from source (server/…), the same folder
 * when run from the production build (dist/server/…), whose depth differs.
 */
function projectRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('package.json not found above the server code');
    dir = parent;
  }
  return dir;
}

/** A file shipped beside package.json (README.md). */
export function projectFile(name: string): string {
  return path.join(projectRoot(), name);
}
