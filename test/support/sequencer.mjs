import { readFileSync } from 'node:fs';
import path from 'node:path';
import TestSequencer from '@jest/test-sequencer';

/**
 * Seconds each test file took in a full run on a 2-vCPU machine (three or four workers). Refresh it now and
 * then from a run's output; a file missing from it counts as quick.
 */
const recorded = JSON.parse(readFileSync(new URL('./test-durations.json', import.meta.url), 'utf8'));

/**
 * Longest files first, so no worker sits idle while one long file finishes last: jest's own timings
 * when its cache has them, else the recorded ones — a fresh CI checkout has no cache, and jest would
 * then order by file size, which says little about a file that waits on processes and leases.
 */
export default class LongestFirst extends TestSequencer {
  sort(tests) {
    const root = process.cwd();
    const seconds = (test) => {
      const cached = this.time(test);
      return cached != null ? cached / 1000 : (recorded[path.relative(root, test.path)] ?? 0);
    };
    return [...tests].sort((a, b) => seconds(b) - seconds(a));
  }
}
