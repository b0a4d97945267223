import { describe, expect, it } from '@jest/globals';
import { loadConfig } from '../../server/config/config.js';

// Reading the environment at boot: what an operator's values turn into, and what stops the process.

describe('configuration', () => {
  it('treats a variable set to the empty string as unset', () => {
    // `METRICS_TOKEN=` in a .env file, or compose's ${METRICS_TOKEN:-}: no token, not a too-short one.
    expect(loadConfig({ METRICS_TOKEN: '' }).metricsToken).toBeUndefined();
    // The same for every variable: the default, never "" coerced to 0 or refused.
    const config = loadConfig({ PORT: '', SHUTDOWN_TIMEOUT_MS: '', LOG_LEVEL: '', DECRYPTION_KEYS: '', HOST: '' });
    const defaults = loadConfig({});
    expect(config.port).toBe(defaults.port);
    expect(config.shutdownTimeoutMs).toBe(defaults.shutdownTimeoutMs);
    expect(config.logLevel).toBe(defaults.logLevel);
    expect(config.decryptionKeys).toEqual([]);
    expect(config.host).toBe(defaults.host);
  });
});
