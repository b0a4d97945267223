import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in for the merchant's shop on 127.0.0.1: every path answers a small "Thanks" page, so the
 * browser has somewhere real to land after the provider's redirect. It keeps the URLs it was asked for.
 */
export class MerchantSite {
  private server = http.createServer((req, res) => {
    this.visits.push(new URL(req.url ?? '/', this.origin));
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Thanks</title></head><body><h1>Thanks</h1><p>Back at the shop.</p></body></html>');
  });
  readonly visits: URL[] = [];
  origin = '';

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.origin = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  url(pathname: string): string {
    return `${this.origin}${pathname}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
