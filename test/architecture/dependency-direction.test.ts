import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { cruise, type ICruiseResult, type IForbiddenRuleType, type IViolation } from 'dependency-cruiser';

/**
 * The dependency direction of README "How the parts fit", checked with the same rules as
 * `npm run lint:deps` (.dependency-cruiser.cjs): on the real tree, and on a small fixture that breaks
 * each rule, so a rule that silently matched nothing would fail here.
 */
const root = path.resolve(import.meta.dirname, '../..');
const config = createRequire(import.meta.url)(path.join(root, '.dependency-cruiser.cjs')) as { forbidden: IForbiddenRuleType[] };

async function violations(baseDir: string, paths: string[]): Promise<IViolation[]> {
  const result = await cruise(paths, {
    baseDir, // the rules are paths relative to the project root
    validate: true,
    ruleSet: { forbidden: config.forbidden },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    moduleSystems: ['es6'],
  }, { extensions: ['.ts', '.js'] });
  const output = result.output as ICruiseResult;
  expect(output.summary.totalDependenciesCruised).toBeGreaterThan(0);
  return output.summary.violations;
}

const fixture = mkdtempSync(path.join(os.tmpdir(), 'deps-fixture-'));
afterAll(() => rmSync(fixture, { recursive: true, force: true }));

function file(relative: string, text: string) {
  mkdirSync(path.dirname(path.join(fixture, relative)), { recursive: true });
  writeFileSync(path.join(fixture, relative), text);
}

describe('dependency direction', () => {
  it('the service holds it: no violations in server/, contract/ or client/', async () => {
    const found = await violations(root, ['server', 'contract', 'client']);
    expect(found.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`)).toEqual([]);
  });

  it('a domain file importing a provider folder fails the check, as does each other rule broken (a simulator using a lib module off the allow-list, a handler naming a provider, a provider reading entities)', async () => {
    file('server/domain/ports.ts', 'export interface Port { name: string }\n');
    file('server/domain/payments/uses-adapter.ts', "import { adapter } from '../../providers/cardpay/adapter.js';\nexport const a = adapter;\n");
    file('server/domain/payments/service.ts', "export const service = 1;\n");
    file('server/providers/cardpay/adapter.ts', "import type { Port } from '../../domain/ports.js';\nexport const adapter: Port = { name: 'cardpay' };\n");
    file('server/providers/cardpay/reaches-domain.ts', "import { service } from '../../domain/payments/service.js';\nexport const s = service;\n");
    file('server/sandbox/cardpay/mirrors-adapter.ts', "import { adapter } from '../../providers/cardpay/adapter.js';\nexport const m = adapter;\n");
    file('server/lib/money.ts', 'export const digits = 2;\n');
    file('server/lib/sql-placeholders.ts', 'export const placeholders = 1;\n');
    file('server/sandbox/cardpay/shares-money.ts', "import { digits } from '../../lib/money.js';\nexport const d = digits;\n");
    file('server/sandbox/sql.ts', "import { placeholders } from '../lib/sql-placeholders.js';\nexport const p = placeholders;\n");
    file('server/jobs/a.ts', "import { b } from './b.js';\nexport const a = () => b;\n");
    file('server/jobs/b.ts', "import { a } from './a.js';\nexport const b = () => a;\n");
    file('server/http/app.ts', "import { registry } from '../providers/registry.js';\nexport const app = registry;\n");
    file('server/domain/payments/uses-http.ts', "import { app } from '../../http/app.js';\nexport const h = app;\n");
    file('server/providers/registry.ts', "import { adapter } from './cardpay/adapter.js';\nexport const registry = [adapter];\n");
    file('server/container.ts', "import { registry } from './providers/registry.js';\nexport const container = registry;\n");
    file('server/persistence/leases.ts', 'export class Leases {}\n');
    file('server/persistence/entities/index.ts', "import type { Port } from '../../domain/ports.js';\nexport type Entities = Port[];\n");
    file('server/providers/cardpay/stores-rows.ts', "import type { Entities } from '../../persistence/entities/index.js';\nexport type E = Entities;\n");
    file('server/providers/mobilemoney/token-store.ts', "import { Leases } from '../../persistence/leases.js';\nexport const l = Leases;\n");
    file('server/lib/knows-domain.ts', "import { service } from '../domain/payments/service.js';\nexport const k = service;\n");
    file('contract/index.ts', "import { digits } from '../server/lib/money.js';\nexport const d = digits;\n");
    const found = await violations(fixture, ['server', 'contract']);
    const rules = found.map((v) => `${v.rule.name}: ${v.from}`);
    expect(rules).toEqual(expect.arrayContaining([
      'domain-names-no-provider: server/domain/payments/uses-adapter.ts',
      'providers-implement-the-port-only: server/providers/cardpay/reaches-domain.ts',
      'sandbox-stands-apart: server/sandbox/cardpay/mirrors-adapter.ts',
      'sandbox-uses-only-generic-lib: server/sandbox/cardpay/shares-money.ts',
      'no-circular: server/jobs/a.ts',
      'domain-is-inner: server/domain/payments/uses-http.ts',
      'providers-are-leaves: server/providers/cardpay/stores-rows.ts',
      'providers-named-by-the-composition-roots-only: server/http/app.ts',
      'persistence-is-inner: server/persistence/entities/index.ts',
      'lib-is-pure: server/lib/knows-domain.ts',
      'contract-is-outermost: contract/index.ts',
    ]));
    // Every rule is broken somewhere in the fixture: a rule added later needs its case here.
    expect(new Set(found.map((v) => v.rule.name))).toEqual(new Set(config.forbidden.map((r) => r.name)));
    // The container names the providers (through the registry), and a provider may hold a lease.
    expect(rules.filter((r) => r.includes('server/container.ts') || r.includes('server/providers/registry.ts'))).toEqual([]);
    expect(rules.filter((r) => r.includes('server/providers/mobilemoney/token-store.ts'))).toEqual([]);
    // A generic helper on the allow-list is one a simulator may use.
    expect(rules.filter((r) => r.includes('server/sandbox/sql.ts'))).toEqual([]);
    // The port itself is the one domain file a provider may import.
    expect(rules.filter((r) => r.includes('server/providers/cardpay/adapter.ts'))).toEqual([]);
  });
});
