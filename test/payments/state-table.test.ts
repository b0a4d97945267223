import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { PAYMENT_STATUSES, REFUND_STATUSES, WEBHOOK_EVENT_TYPES } from '../../contract/index.js';
import { PAYMENT_EDGES, REFUND_EDGES, paymentEdge, refundEdge } from '../../server/domain/payments/state-table.js';

describe('the table of allowed status moves', () => {
  it('lets a payment move exactly as interface.md says, each move with its merchant event', () => {
    const allowed = PAYMENT_EDGES.map((e) => `${e.from}→${e.to} ${e.event} via ${e.via}${e.movesMoney ? ' (moves money)' : ''}`);
    expect(allowed).toEqual([
      'pending→completed payment.completed via provider (moves money)',
      'pending→failed payment.failed via provider',
      'completed→refunded payment.refunded via refund (moves money)',
      'completed→reversed payment.reversed via refund (moves money)',
    ]);
  });

  it('refuses every other payment move: terminal statuses never move, completed never goes back', () => {
    for (const from of PAYMENT_STATUSES) {
      for (const to of PAYMENT_STATUSES) {
        const listed = PAYMENT_EDGES.some((e) => e.from === from && e.to === to);
        expect([from, to, paymentEdge(from, to) !== null]).toEqual([from, to, listed]);
      }
    }
    for (const terminal of ['failed', 'refunded', 'reversed'] as const) {
      expect(PAYMENT_STATUSES.map((to) => paymentEdge(terminal, to))).toEqual(PAYMENT_STATUSES.map(() => null));
    }
    expect(paymentEdge('completed', 'pending')).toBeNull();
    expect(paymentEdge('completed', 'failed')).toBeNull();
  });

  it('moves a refund out of pending (completed emits payment.refunded, failed refund.failed), and a completed one only to failed', () => {
    expect(REFUND_EDGES.map((e) => `${e.from}→${e.to} ${e.event}${e.movesMoney ? ' (moves money)' : ''}`)).toEqual([
      'pending→completed payment.refunded (moves money)',
      'pending→failed refund.failed',
      'completed→failed refund.failed (moves money)',
    ]);
    for (const from of REFUND_STATUSES) {
      for (const to of REFUND_STATUSES) if (from !== 'pending' && !(from === 'completed' && to === 'failed')) expect(refundEdge(from, to)).toBeNull();
    }
  });

  it('names only statuses and event types the contract declares', () => {
    for (const e of PAYMENT_EDGES) expect([PAYMENT_STATUSES.includes(e.from), PAYMENT_STATUSES.includes(e.to), WEBHOOK_EVENT_TYPES.includes(e.event)]).toEqual([true, true, true]);
    for (const e of REFUND_EDGES) expect([REFUND_STATUSES.includes(e.from), REFUND_STATUSES.includes(e.to), WEBHOOK_EVENT_TYPES.includes(e.event)]).toEqual([true, true, true]);
  });
});

describe('one status writer', () => {
  it('no file of the service but status-writer.ts assigns a payment or refund status', () => {
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (path.endsWith('.ts')) files.push(path);
      }
    };
    walk('server');
    const writers = files.filter((f) => !f.startsWith(join('server', 'sandbox'))).filter((f) => {
      const text = readFileSync(f, 'utf8');
      // An entity assignment (not a query filter such as where.status, nor a trigger reading NEW/OLD.status), or an SQL UPDATE setting status.
      return /(?<!where|NEW|OLD)\.status\s*=[^=]/.test(text) || /UPDATE\s+(payments|refunds)\s+SET\s+(?:[^;`]*?,\s*)?status\s*=/i.test(text);
    });
    expect(writers).toEqual([join('server', 'domain', 'payments', 'status-writer.ts')]);
  });
});
