import type { EntityManager } from '@mikro-orm/postgresql';
import { currentMisreport } from '../controls.js';
import { eachObject, type MisreportRewriter } from '../misreport.js';

/**
 * Integrity tests: pulled transactions and transaction-status results report another amount (the
 * operator's amounts have no currency, so only the amount can lie).
 */
export const misreport: MisreportRewriter = (body, m) => {
  if (m.amount === undefined) return body;
  eachObject(body, (o) => {
    if (typeof o.transactionId === 'string' && 'amount' in o) o.amount = m.amount;
    if (o.Key === 'Amount' && 'Value' in o) o.Value = m.amount;
  });
  return body;
};

/** A Result body as the operator will send it later: with the misreported amount while the switch is on. */
export async function asReported<T>(em: EntityManager, body: T): Promise<T> {
  const lie = await currentMisreport(em, 'mobilemoney');
  return lie ? (misreport(structuredClone(body), lie) as T) : body;
}
