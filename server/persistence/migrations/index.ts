import type { MigrationObject } from '@mikro-orm/core';
import { Migration20261122000001_foundation } from './Migration20261122000001_foundation.js';
import { Migration20261122000002_payments } from './Migration20261122000002_payments.js';

/**
 * Every migration, in order. Listed explicitly (not globbed) so tsx, jest and a compiled build all
 * load the same set. A new migration is a new file here: `npm run migration:create -- name`.
 */
export const migrationsList: MigrationObject[] = [
  { name: 'Migration20261122000001_foundation', class: Migration20261122000001_foundation },
  { name: 'Migration20261122000002_payments', class: Migration20261122000002_payments },
];
