import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { it, expect } from '@jest/globals';
it('fetch keepalive', async () => {
  const server = http.createServer((_req, res) => res.end('ok'));
  server.keepAliveTimeout = 5000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  expect(await res.text()).toBe('ok');
  server.closeIdleConnections();
  await new Promise<void>((r) => server.close(() => r()));
});
