import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { loadConfig } from '../../server/config/config.js';
import { ProviderError } from '../../server/domain/ports.js';
import { MobilemoneyAdapter } from '../../server/providers/mobilemoney/adapter.js';
import { ForwardingStub, jsonAnswer, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { sandboxCreds } from './mobilemoney-helpers.js';

/**
 * Daraja's STK query answer states no amount: the CheckoutRequestID it echoes is all that ties it to the
 * push asked about, whose amount the service then reports as the operator's. An answer about another push
 * (a proxy's or the operator's mix-up) must never complete our payment at our own amount.
 */

/** In front of the simulator: answers every STK query itself, as a success about `answeredId` (or with `body` when set). */
class StkQueryAnswer extends ForwardingStub {
  answeredId = '';
  body: Record<string, unknown> | null = null;
  protected override intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (!req.url.endsWith('/stkpushquery/v1/query')) return forward();
    return Promise.resolve(
      jsonAnswer(200, this.body ?? {
        ResponseCode: '0', ResponseDescription: 'The service request has been accepted successsfully', MerchantRequestID: '29115-34620561-1',
        CheckoutRequestID: this.answeredId, ResultCode: '0', ResultDesc: 'The service request is processed successfully.',
      }),
    );
  }
}

let t: TestService;
let stub: StkQueryAnswer;
let adapter: MobilemoneyAdapter;

beforeAll(async () => {
  t = await startTestService();
  stub = new StkQueryAnswer();
  stub.target = t.baseUrl;
  const base = `${await stub.start()}/sandbox/mobilemoney`;
  adapter = new MobilemoneyAdapter(loadConfig({ NODE_ENV: 'test', SANDBOX: 'false', MOBILEMONEY_BASE_URL: base }), t.service.container.orm.em);
});
afterAll(async () => {
  await stub.stop();
  await t.stop();
});

const ours = 'ws_CO_291120261015000001';
const amount = { minor: 10_000n, currency: 'KES' };

it('refuses an STK query answer about another push (unavailable: nothing applied), and takes one about ours', async () => {
  const creds = sandboxCreds();
  stub.answeredId = 'ws_CO_291120261015009999';
  const refused = await adapter.queryPayment(creds, ours, amount).then(
    () => null,
    (err: unknown) => err,
  );
  expect(refused).toBeInstanceOf(ProviderError);
  expect(refused).toMatchObject({ kind: 'unavailable', message: expect.stringContaining('ws_CO_291120261015009999') });

  stub.answeredId = ours;
  expect(await adapter.queryPayment(creds, ours, amount)).toMatchObject({ providerRef: ours, status: 'completed', amount });
});

/** What the adapter made of an STK query answer: its result, or the ProviderError it threw. */
const outcomeOf = (creds: ReturnType<typeof sandboxCreds>) => adapter.queryPayment(creds, ours, amount).then(
  (result) => ({ result }),
  (err: unknown) => ({ err }),
);

describe('an STK query answer that is no answer about the push (Daraja: ResponseCode "0 means successful submission and any other code means an error occurred")', () => {
  afterEach(() => {
    stub.body = null;
  });

  it('a refused submission (ResponseCode 1, no ResultCode) is no outcome: unavailable, never the push failed', async () => {
    stub.body = { ResponseCode: '1', ResponseDescription: 'The service request has failed', MerchantRequestID: '29115-34620561-1', CheckoutRequestID: ours };
    const { result, err } = await outcomeOf(sandboxCreds()) as { result?: unknown; err?: unknown };
    expect(result).toBeUndefined(); // was { status: 'failed', failureReason: 'ResultCode undefined' }
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ kind: 'unavailable', message: expect.stringContaining('The service request has failed') });
  });

  it('a refused submission that still carries a ResultCode is no outcome either', async () => {
    stub.body = { ResponseCode: 1, ResponseDescription: 'The service request has failed', CheckoutRequestID: ours, ResultCode: '1032', ResultDesc: 'Request cancelled by user' };
    expect(await outcomeOf(sandboxCreds())).toEqual({ err: expect.objectContaining({ kind: 'unavailable' }) });
  });

  it('an accepted submission with no ResultCode, or an empty one, says nothing of the push: unavailable', async () => {
    for (const resultCode of [{}, { ResultCode: '' }, { ResultCode: null }]) {
      stub.body = { ResponseCode: '0', ResponseDescription: 'The service request has been accepted successsfully', CheckoutRequestID: ours, ...resultCode };
      expect(await outcomeOf(sandboxCreds())).toEqual({ err: expect.objectContaining({ kind: 'unavailable' }) });
    }
  });

  it('a number ResultCode still settles the push as before', async () => {
    stub.body = { ResponseCode: 0, ResponseDescription: 'ok', CheckoutRequestID: ours, ResultCode: 1032, ResultDesc: 'Request cancelled by user' };
    expect(await adapter.queryPayment(sandboxCreds(), ours, amount)).toMatchObject({ status: 'failed', failureReason: 'Request cancelled by user' });
  });
});
