import { randomUUID } from 'node:crypto';
import https from 'node:https';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiError, CheckoutPaymentIntent, Client, Environment, OrdersController, PaymentsController } from '@paypal/paypal-server-sdk';
import { ForwardingStub } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The walletpay simulator driven by PayPal's own server SDK (`@paypal/paypal-server-sdk`), unchanged:
 * its requests leave for https://api-m.sandbox.paypal.com and, on this machine without outside
 * network, an HTTPS agent hands the connection to a loopback front that passes each request (same
 * method, path, headers and bytes) to /sandbox/walletpay. What the SDK accepts here — bodies, statuses,
 * error objects — is what it accepts from PayPal.
 */
let t: TestService;
let front: ForwardingStub;
let agent: https.Agent;

beforeAll(async () => {
  t = await startTestService();
  front = new ForwardingStub();
  front.target = `${t.baseUrl}/sandbox/walletpay`;
  const port = Number(new URL(await front.start()).port);
  agent = new https.Agent({ keepAlive: false });
  // The SDK's HTTPS connection goes to the loopback front, in clear (nothing leaves the machine).
  (agent as unknown as { createConnection: () => net.Socket }).createConnection = () => net.connect(port, '127.0.0.1');
});
afterAll(async () => {
  agent.destroy();
  await front.stop();
  await t.stop();
});

const client = (secret = `secret-${randomUUID()}`) =>
  new Client({
    clientCredentialsAuthCredentials: { oAuthClientId: `client-${randomUUID()}`, oAuthClientSecret: secret },
    environment: Environment.Sandbox,
    timeout: 5000,
    httpClientOptions: { httpsAgent: agent, retryConfig: { maxNumberOfRetries: 0 } },
  });

async function apiError(promise: Promise<unknown>): Promise<ApiError<{ name?: string; details?: { issue?: string }[]; debug_id?: string }>> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError<{ name?: string; details?: { issue?: string }[]; debug_id?: string }>;
  }
  throw new Error('expected an ApiError');
}

const orderBody = (value = '10.00') => ({
  intent: CheckoutPaymentIntent.Capture,
  purchaseUnits: [{ amount: { currencyCode: 'USD', value }, customId: 'order-42' }],
});

describe("PayPal's server SDK against the walletpay simulator", () => {
  it('create order → buyer approves → capture → partial refund → get refund', async () => {
    const c = client();
    const orders = new OrdersController(c);
    const payments = new PaymentsController(c);
    const created = await orders.createOrder({ body: orderBody(), paypalRequestId: randomUUID() });
    expect(created.statusCode).toBe(201);
    expect(created.result).toMatchObject({ status: 'CREATED' });
    const approve = created.result.links?.find((l) => l.rel === 'approve');
    expect(approve?.href).toEqual(expect.any(String));

    await fetch(`${approve!.href}&auto=approve`, { redirect: 'manual' });
    expect((await orders.getOrder({ id: created.result.id! })).result.status).toBe('APPROVED');

    const captured = await orders.captureOrder({ id: created.result.id!, paypalRequestId: randomUUID() });
    expect(captured.statusCode).toBe(201);
    const capture = captured.result.purchaseUnits?.[0]?.payments?.captures?.[0];
    expect(capture).toMatchObject({ status: 'COMPLETED', amount: { currencyCode: 'USD', value: '10.00' }, customId: 'order-42' });

    const body = { amount: { currencyCode: 'USD', value: '3.00' } };
    // PayPal's default answer is minimal (id, status, links); the full refund on request.
    const minimal = await payments.refundCapturedPayment({ captureId: capture!.id!, paypalRequestId: randomUUID(), body: { ...body, amount: { ...body.amount, value: '1.00' } } });
    expect(minimal.statusCode).toBe(201);
    expect(minimal.result).toMatchObject({ id: expect.any(String), status: 'COMPLETED' });
    const refund = await payments.refundCapturedPayment({ captureId: capture!.id!, paypalRequestId: randomUUID(), prefer: 'return=representation', body });
    expect(refund.result).toMatchObject({ status: 'COMPLETED', amount: { currencyCode: 'USD', value: '3.00' } });
    expect((await payments.getRefund({ refundId: refund.result.id! })).result).toMatchObject({ id: refund.result.id, status: 'COMPLETED', amount: { value: '3.00' } });
    expect((await payments.getCapturedPayment({ captureId: capture!.id! })).result.status).toBe('PARTIALLY_REFUNDED');
  });

  it("error objects: 422 ORDER_NOT_APPROVED / ORDER_ALREADY_CAPTURED, 404 RESOURCE_NOT_FOUND, refund over the capture, as PayPal's", async () => {
    const c = client();
    const orders = new OrdersController(c);
    const payments = new PaymentsController(c);
    const created = await orders.createOrder({ body: orderBody('5.00'), paypalRequestId: randomUUID() });

    const early = await apiError(orders.captureOrder({ id: created.result.id!, paypalRequestId: randomUUID() }));
    expect(early.statusCode).toBe(422);
    expect(early.result).toMatchObject({ name: 'UNPROCESSABLE_ENTITY', debug_id: expect.any(String), details: [expect.objectContaining({ issue: 'ORDER_NOT_APPROVED' })] });

    await fetch(`${created.result.links!.find((l) => l.rel === 'approve')!.href}&auto=approve`, { redirect: 'manual' });
    const captured = await orders.captureOrder({ id: created.result.id!, paypalRequestId: randomUUID() });
    const again = await apiError(orders.captureOrder({ id: created.result.id!, paypalRequestId: randomUUID() }));
    expect(again.statusCode).toBe(422);
    expect(again.result?.details?.[0]?.issue).toBe('ORDER_ALREADY_CAPTURED');

    const captureId = captured.result.purchaseUnits![0]!.payments!.captures![0]!.id!;
    const tooMuch = await apiError(payments.refundCapturedPayment({ captureId, paypalRequestId: randomUUID(), body: { amount: { currencyCode: 'USD', value: '9.00' } } }));
    expect(tooMuch.statusCode).toBe(422);
    expect(tooMuch.result?.details?.[0]?.issue).toBe('REFUND_AMOUNT_EXCEEDED');

    const missing = await apiError(orders.getOrder({ id: 'NOSUCHORDER12345' }));
    expect(missing.statusCode).toBe(404);
    expect(missing.result?.name).toBe('RESOURCE_NOT_FOUND');
  });

  it('refused client credentials: the token request fails and no order is made', async () => {
    const orders = new OrdersController(client('bad-secret'));
    const err = await orders.createOrder({ body: orderBody(), paypalRequestId: randomUUID() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(JSON.stringify(err)).toMatch(/invalid_client|401|AUTHENTICATION/i);
  });
});
