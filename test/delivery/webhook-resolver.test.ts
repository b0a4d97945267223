import dgram from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MAX_LOOKUPS_PER_MERCHANT, WebhookResolver, parseHostsFile } from '../../server/domain/delivery/webhook-resolver.js';
import { waitFor } from './receiver.js';

/** A nameserver that never answers; it keeps the name of every query (both A and AAAA are asked). */
let socket: dgram.Socket;
const asked: string[] = [];
beforeAll(async () => {
  socket = dgram.createSocket('udp4');
  socket.on('message', (packet) => {
    const labels: string[] = [];
    for (let at = 12; at < packet.length && packet[at]! > 0; at += packet[at]! + 1) {
      labels.push(packet.subarray(at + 1, at + 1 + packet[at]!).toString('latin1'));
    }
    asked.push(labels.join('.'));
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
});
afterAll(() => new Promise<void>((resolve) => socket.close(() => resolve())));

const server = () => `127.0.0.1:${socket.address().port}`;

describe('webhook host resolver', () => {
  it('one merchant has at most its share of hosts being resolved; another merchant\'s lookups start at once', async () => {
    const resolver = new WebhookResolver([server()]);
    const hosts = Array.from({ length: MAX_LOOKUPS_PER_MERCHANT + 2 }, (_, i) => `host-${i}.a.black-hole.test`);
    const lookups = hosts.map((host) => resolver.lookup('merchant-a', host).then(() => 'answered', (err: Error) => err.message));
    await waitFor(async () => hosts.slice(0, MAX_LOOKUPS_PER_MERCHANT).every((h) => asked.includes(h)), 'the first lookups asked');

    // Merchant B's host is asked while A's last two still wait for A's turn.
    const other = resolver.lookup('merchant-b', 'shop.b.black-hole.test').catch((err: Error) => err.message);
    await waitFor(async () => asked.includes('shop.b.black-hole.test'), "merchant B's lookup asked");
    expect(new Set(asked.filter((name) => name.endsWith('.a.black-hole.test')))).toEqual(new Set(hosts.slice(0, MAX_LOOKUPS_PER_MERCHANT)));

    // Concurrent lookups of one host share its query.
    const again = resolver.lookup('merchant-a', hosts[0]!).catch((err: Error) => err.message);
    expect(await Promise.all(lookups)).toEqual(hosts.map((host) => `DNS lookup for ${host} timed out`));
    expect(await again).toBe(`DNS lookup for ${hosts[0]} timed out`);
    expect(await other).toBe('DNS lookup for shop.b.black-hole.test timed out');
  }, 30_000);

  it('answers names of the hosts file (localhost) without asking the nameserver', async () => {
    const resolver = new WebhookResolver([server()]);
    const before = asked.length;
    expect(await resolver.lookup('merchant-a', 'localhost')).toContainEqual({ address: '127.0.0.1', family: 4 });
    expect(asked.length).toBe(before);
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
