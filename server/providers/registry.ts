import type { EntityManager } from '@mikro-orm/postgresql';
import type { AppConfig } from '../config/config.js';
import type { AdapterDecorator, ProviderPort, ProviderRegistry } from '../domain/ports.js';
import { cardpayProvider } from './cardpay/provider.js';
import { mobilemoneyProvider } from './mobilemoney/provider.js';
import { walletpayProvider } from './walletpay/provider.js';

/**
 * Every provider of this build: one line each. Adding a provider is its contract enum value and
 * credential schema, its folder here and under server/sandbox, this line and a migration (README).
 */
export function createProviderRegistry(config: AppConfig, em: EntityManager, instrument?: AdapterDecorator): ProviderRegistry {
  // Credentials are decrypted per merchant and handed back to the same provider's port: the domain
  // holds them as opaque values (ProviderPort<unknown>).
  const ports: ProviderPort[] = [
    cardpayProvider(config, instrument),
    walletpayProvider(config, instrument),
    mobilemoneyProvider(config, em, instrument),
  ];
  const byName = new Map<string, ProviderPort>(ports.map((port) => [port.name, port]));
  return {
    get(provider) {
      const port = byName.get(provider);
      if (!port) throw new Error(`${provider} is not a provider of this build`);
      return port;
    },
    find: (provider) => byName.get(provider),
    all: () => [...byName.values()],
  };
}
