/**
 * The service's dependency direction (README "How the parts fit"), checked by `npm run lint:deps` in CI
 * and by test/architecture/dependency-direction.test.ts:
 *   contract → http → domain (ports) ← providers;  domain → persistence (its entities are the domain
 *   model);  only the composition roots (the container, the admin CLI) name providers;  sandbox stands apart;  lib is shared (with the
 *   simulators, only its generic helpers).
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: 'domain-names-no-provider',
      comment: 'The domain reaches providers only through domain/ports.ts and the registry the container hands it.',
      severity: 'error',
      from: { path: '^server/domain/' },
      to: { path: '^server/(providers|sandbox)/' },
    },
    {
      name: 'domain-is-inner',
      comment: 'The domain knows nothing of HTTP, jobs or the wiring.',
      severity: 'error',
      from: { path: '^server/domain/' },
      to: { path: '^server/(http|jobs|admin)/|^server/(container|service|main)\\.ts$' },
    },
    {
      name: 'providers-implement-the-port-only',
      comment: 'A provider folder may import the port (domain/ports.ts) and nothing else of the domain.',
      severity: 'error',
      from: { path: '^server/providers/' },
      to: { path: '^server/domain/', pathNot: '^server/domain/ports\\.ts$' },
    },
    {
      name: 'providers-are-leaves',
      comment:
        'Providers do not reach into the simulators, HTTP, jobs, observability or the wiring, nor into persistence but its ' +
        'leases (a row-based lease, generic plumbing: mobilemoney shares its OAuth token through one).',
      severity: 'error',
      from: { path: '^server/providers/' },
      to: {
        path: '^server/(sandbox|http|jobs|admin|observability|persistence)/|^server/(container|service|main)\\.ts$',
        pathNot: '^server/persistence/leases\\.ts$',
      },
    },
    {
      name: 'providers-named-by-the-composition-roots-only',
      comment:
        'Concrete providers are named in providers/registry.ts, which only the composition roots import — server/container.ts, ' +
        'and the admin CLI (server/admin/cli.ts), which reads provider capabilities without building a container: the rest of ' +
        'the service reaches a provider through the port and the registry the container hands it.',
      severity: 'error',
      from: { path: '^server/', pathNot: '^server/providers/|^server/container\\.ts$|^server/admin/cli\\.ts$' },
      to: { path: '^server/providers/' },
    },
    {
      name: 'persistence-is-inner',
      comment: 'The domain uses persistence (entities, leases, prepared statements), never the other way round.',
      severity: 'error',
      from: { path: '^server/persistence/' },
      to: { path: '^server/(domain|providers|sandbox|http|jobs|admin|observability)/|^server/(container|service|main)\\.ts$' },
    },
    {
      name: 'sandbox-stands-apart',
      comment: 'A simulator shares no code with the adapter it exists to test, nor with the domain: a bug is caught, not mirrored.',
      severity: 'error',
      from: { path: '^server/sandbox/' },
      to: { path: '^server/(domain|providers|http|jobs|persistence|admin)/|^server/(container|service|main)\\.ts$' },
    },
    {
      name: 'sandbox-uses-only-generic-lib',
      comment:
        'Of server/lib a simulator may use only the generic helpers listed here (SQL plumbing), never money, signatures ' +
        'or wire formats an adapter also uses: those the simulator writes for itself, as the provider does.',
      severity: 'error',
      from: { path: '^server/sandbox/' },
      to: { path: '^server/lib/', pathNot: '^server/lib/(sql-placeholders|count-queries|pg-connection)\\.ts$' },
    },
    {
      name: 'lib-is-pure',
      comment: 'server/lib holds pure helpers shared by domain and providers (and a few generic ones with simulators): it imports none of them.',
      severity: 'error',
      from: { path: '^server/lib/' },
      to: { path: '^server/', pathNot: '^server/lib/' },
    },
    {
      name: 'contract-is-outermost',
      comment: 'The contract (shared with the SDK) imports nothing of the server.',
      severity: 'error',
      from: { path: '^contract/' },
      to: { path: '^server/' },
    },
    {
      name: 'no-circular',
      comment: 'No import circles (type-only imports included).',
      severity: 'error',
      from: { path: '^(server|contract|client)/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'], extensions: ['.ts', '.js'] },
    moduleSystems: ['es6'],
  },
};
