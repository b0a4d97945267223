import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { migrationsList } from '../../server/persistence/migrations/index.js';

/**
 * The README's "Rolling back" paragraph names every migration whose down() drops a column of the
 * tables that hold merchants' money and its history (payments, refunds, webhook_deliveries): an operator
 * reverting past one loses that column's values, and going forward again brings it back empty. A new
 * such migration without its line there fails here (Migration20261128009130 was missed once: its loss
 * turns off the other-account check for every earlier payment).
 */

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const rollingBack = readme.slice(readme.indexOf('**Rolling back.**'), readme.indexOf('**Dead database connections.**'));

const downOf = (name: string): string => {
  const source = readFileSync(new URL(`../../server/persistence/migrations/${name}.ts`, import.meta.url), 'utf8');
  return source.slice(source.indexOf('async down('));
};

describe("README's rollback notes", () => {
  it('name every migration whose down() drops a column of payments, refunds or webhook_deliveries', () => {
    expect(rollingBack.length).toBeGreaterThan(1000);
    const dropping = migrationsList.map((m) => m.name).filter((name) => /ALTER TABLE (payments|refunds|webhook_deliveries)\b[^;]*DROP COLUMN/.test(downOf(name)));
    expect(dropping.length).toBeGreaterThanOrEqual(10);
    // Named by the tail the README uses (`…009130_payment_provider_account`), unique across migrations.
    expect(dropping.filter((name) => !rollingBack.includes(name.slice('Migration20261128'.length)))).toEqual([]);
  });
});
