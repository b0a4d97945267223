import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MAX_LOOKUPS_PER_MERCHANT, MerchantHostResolver, parseHostsFile } from '../../server/domain/merchants/merchant-host-resolver.js';
import { startNameserver } from '../support/nameserver.js';
import { waitFor } from './receiver.js';

/** Answers shop.answers.test; never answers any other name. */
let nameserver: Awaited<ReturnType<typeof startNameserver>>;
beforeAll(async () => {
  nameserver = await startNameserver({ 'shop.answers.test': '93.184.215.14' });
});
afterAll(() => nameserver.close());

const asked = () => nameserver.asked;
const server = () => nameserver.address;

describe('merchant host resolver', () => {
  it('one merchant has at most its share of hosts being resolved; another merchant\'s lookups start at once', async () => {
    const resolver = new MerchantHostResolver([server()]);
    const hosts = Array.from({ length: MAX_LOOKUPS_PER_MERCHANT + 2 }, (_, i) => `host-${i}.a.black-hole.test`);
    const lookups = hosts.map((host) => resolver.lookup('merchant-a', host).then(() => 'answered', (err: Error) => err.message));
    await waitFor(async () => hosts.slice(0, MAX_LOOKUPS_PER_MERCHANT).every((h) => asked().includes(h)), 'the first lookups asked');

    // Merchant B's host is asked while A's last two still wait for A's turn.
    const other = resolver.lookup('merchant-b', 'shop.b.black-hole.test').catch((err: Error) => err.message);
    await waitFor(async () => asked().includes('shop.b.black-hole.test'), "merchant B's lookup asked");
    expect(new Set(asked().filter((name) => name.endsWith('.a.black-hole.test')))).toEqual(new Set(hosts.slice(0, MAX_LOOKUPS_PER_MERCHANT)));

    // Concurrent lookups of one host share its query.
    const again = resolver.lookup('merchant-a', hosts[0]!).catch((err: Error) => err.message);
    expect(await Promise.all(lookups)).toEqual(hosts.map((host) => `DNS lookup for ${host} timed out`));
    expect(await again).toBe(`DNS lookup for ${hosts[0]} timed out`);
    expect(await other).toBe('DNS lookup for shop.b.black-hole.test timed out');
  }, 30_000);

  it('answers from the nameserver, then from its cache for the record\'s TTL', async () => {
    const resolver = new MerchantHostResolver([server()]);
    expect(await resolver.lookup('merchant-a', 'shop.answers.test')).toEqual([{ address: '93.184.215.14', family: 4 }]);
    expect(await resolver.lookup('merchant-b', 'SHOP.answers.test')).toEqual([{ address: '93.184.215.14', family: 4 }]);
    // One A and one AAAA query (no AAAA record), for both lookups.
    expect(asked().filter((name) => name === 'shop.answers.test')).toHaveLength(2);
  });

  it('answers names of the hosts file (localhost) without asking the nameserver', async () => {
    const resolver = new MerchantHostResolver([server()]);
    const before = asked().length;
    expect(await resolver.lookup('merchant-a', 'localhost')).toContainEqual({ address: '127.0.0.1', family: 4 });
    expect(asked().length).toBe(before);
  });

  it('reads a hosts file: addresses with their names and aliases, comments ignored', () => {
    const names = parseHostsFile('127.0.0.1 localhost vm # this machine\n::1 localhost ip6-localhost\n# 10.0.0.1 hidden\nnot-an-address name\n');
    expect(Object.fromEntries(names)).toEqual({
      localhost: [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }],
      vm: [{ address: '127.0.0.1', family: 4 }],
      'ip6-localhost': [{ address: '::1', family: 6 }],
    });
  });
});
