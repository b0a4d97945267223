import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A request the stub received, read whole. */
export interface StubRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** An answer: the forwarded one (maybe altered) or one the stub makes itself. */
export interface StubAnswer {
  status: number;
  headers?: http.OutgoingHttpHeaders;
  body?: Buffer | string;
}

/** The answer of the server behind, read whole. */
export interface ForwardedAnswer extends StubAnswer {
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** Sends the request on to `to` (by default the target followed by the request's path) and reads the whole answer. */
export type Forward = (to?: string) => Promise<ForwardedAnswer>;

/** A JSON answer the stub makes itself. */
export const jsonAnswer = (status: number, value: unknown): StubAnswer => ({
  status,
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify(value),
});

/**
 * An HTTP server in front of another one (a provider's simulator, the service's webhook endpoint): it
 * forwards every request to `target` and passes the answer back. A test's subclass overrides
 * `intercept` to answer some requests itself, alter an answer, or hold a request unanswered.
 */
export class ForwardingStub {
  /** Where requests go, without a trailing slash: the request's path is appended. */
  target = '';
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const request: StubRequest = { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks) };
      this.intercept(request, (to) => this.forward(request, to ?? `${this.target}${request.url}`)).then(
        (answer) => {
          if (answer === 'cut') res.destroy();
          else if (answer !== 'hold') write(res, answer);
        },
        () => res.destroy(),
      );
    });
  });

  /**
   * What the stub does with one request: by default forwards it and passes the answer back. 'hold'
   * answers nothing: the connection stays open until the caller gives up or the stub stops. 'cut'
   * closes the connection unanswered (a network failing on the way back).
   */
  protected intercept(_req: StubRequest, forward: Forward): Promise<StubAnswer | 'hold' | 'cut'> {
    return forward();
  }

  /** Listens on a free loopback port; returns its base URL (http://127.0.0.1:port). */
  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Closes every connection, held ones included, and the server. */
  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private forward(req: StubRequest, to: string): Promise<ForwardedAnswer> {
    const headers = { ...req.headers };
    delete headers.host;
    delete headers.connection;
    return new Promise((resolve, reject) => {
      const upstream = http.request(to, { method: req.method, headers, agent: false }, (answer) => {
        const body: Buffer[] = [];
        answer.on('data', (c: Buffer) => body.push(c));
        answer.on('end', () => resolve({ status: answer.statusCode ?? 502, headers: answer.headers, body: Buffer.concat(body) }));
        answer.on('error', reject);
      });
      upstream.on('error', reject);
      upstream.end(req.body);
    });
  }
}

/** Writes a whole answer. Its body may have been altered: Node frames it anew (the forwarded length and encoding are dropped). */
function write(res: http.ServerResponse, answer: StubAnswer): void {
  const headers = { ...answer.headers };
  delete headers['content-length'];
  delete headers['transfer-encoding'];
  res.writeHead(answer.status, headers);
  res.end(answer.body);
}
