import type { Histogram } from 'prom-client';
import { PROVIDER_ERROR_KINDS, ProviderError } from '../domain/ports.js';

type CallHistogram = Histogram<'provider' | 'operation' | 'outcome'>;

/** The `outcome` label: `ok`, the ProviderError kind (declined, unavailable, indeterminate, …), or `error` for anything else. */
export const PROVIDER_CALL_OUTCOMES = ['ok', ...PROVIDER_ERROR_KINDS, 'error'] as const;
type ProviderCallOutcome = (typeof PROVIDER_CALL_OUTCOMES)[number];

function outcomeOf(err: unknown): ProviderCallOutcome {
  return err instanceof ProviderError ? err.kind : 'error';
}

/**
 * The adapter as it is, with every method call timed into provider_call_duration_seconds by provider,
 * operation (the method name) and outcome. A decorator applied where the container builds the
 * adapters: the adapters themselves know nothing of metrics. Calls an adapter makes to its own methods
 * run on the adapter itself, so only the port's operations are counted, once each.
 */
export function instrumentProvider<T extends object>(provider: string, adapter: T, histogram: CallHistogram): T {
  return new Proxy(adapter, {
    get(target, property) {
      const value = Reflect.get(target, property) as unknown;
      if (typeof value !== 'function' || typeof property !== 'string' || property === 'constructor') return value;
      return (...args: unknown[]) => {
        const end = histogram.startTimer({ provider, operation: property });
        let result: unknown;
        try {
          result = Reflect.apply(value, target, args);
        } catch (err) {
          end({ outcome: outcomeOf(err) });
          throw err;
        }
        if (result instanceof Promise) {
          return result.then(
            (v) => {
              end({ outcome: 'ok' });
              return v;
            },
            (err: unknown) => {
              end({ outcome: outcomeOf(err) });
              throw err;
            },
          );
        }
        // A synchronous helper (URL building, parsing): not a provider call, not timed.
        return result;
      };
    },
  });
}
