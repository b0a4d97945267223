import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { migrationsList } from '../../server/persistence/migrations/index.js';

/**
 * The README's "Rolling back" paragraph names every migration whose down() drops a column of a table
 * the service keeps state in (every table but the simulators' `sandbox_…` ones, and the few listed below
 * with why their loss is harmless): an operator reverting past one loses that column's values, and going
 * forward again brings it back empty. A new such migration without its line there fails here
 * (Migration20261128009130 was missed once: its loss turns off the other-account check for every earlier payment).
 */

/** Tables whose dropped columns cost nothing after a rollback, with why. */
const HARMLESS: Record<string, string> = {
  // Operator queries in flight for minutes at most: with every process stopped for the rollback, none is.
  provider_status_queries: 'rows of in-flight operator status queries',
};

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const rollingBack = readme.slice(readme.indexOf('**Rolling back.**'), readme.indexOf('**Dead database connections.**'));

const downOf = (name: string): string => {
  const source = readFileSync(new URL(`../../server/persistence/migrations/${name}.ts`, import.meta.url), 'utf8');
  return source.slice(source.indexOf('async down('));
};

describe("README's rollback notes", () => {
  it("name every migration whose down() drops a column of a table the service keeps state in", () => {
    expect(rollingBack.length).toBeGreaterThan(1000);
    const tablesLosingColumns = (name: string) =>
      [...downOf(name).matchAll(/ALTER TABLE (?:IF EXISTS )?"?(\w+)"?[^;]*?DROP COLUMN/gi)].map((m) => m[1]!.toLowerCase());
    const dropping = migrationsList
      .map((m) => m.name)
      .filter((name) => tablesLosingColumns(name).some((table) => !table.startsWith('sandbox_') && !(table in HARMLESS)));
    expect(dropping.length).toBeGreaterThanOrEqual(11);
    // Named by the tail the README uses (`…009130_payment_provider_account`), unique across migrations.
    expect(dropping.filter((name) => !rollingBack.includes(name.slice('Migration20261128'.length)))).toEqual([]);
  });
});
