import { describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from '../../server/config/config.js';
import { isAllowedSource } from '../../server/providers/mobilemoney/callback.js';

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

  it('refuses a MOBILEMONEY_CALLBACK_ALLOWLIST entry that is not an address or CIDR, naming it', () => {
    const allowlist = (value: string) => loadConfig({ MOBILEMONEY_CALLBACK_ALLOWLIST: value }).mobilemoneyCallbackAllowlist;
    // Each of these used to boot and match nothing: every live callback refused.
    for (const [value, bad] of [
      ['196.201.214.200 196.201.214.206', '196.201.214.200 196.201.214.206'],
      ['196.201.214.200;196.201.214.206', '196.201.214.200;196.201.214.206'],
      ['196.201.214.200, 196.201.213.0/24x', '196.201.213.0/24x'],
      ['10.0.0.0/33', '10.0.0.0/33'],
      ['196.201.214', '196.201.214'],
      ['callbacks.example.com', 'callbacks.example.com'],
    ]) {
      expect(() => allowlist(value!)).toThrow(ConfigError);
      expect(() => allowlist(value!)).toThrow(`"${bad}"`);
    }
    expect(() => allowlist(' , ')).toThrow(ConfigError);
    // What is accepted is what the callback check matches.
    const accepted = allowlist(' 196.201.214.200 , 196.201.212.0/24,2001:db8::/32,::ffff:10.1.0.0/112 ');
    expect(accepted).toEqual(['196.201.214.200', '196.201.212.0/24', '2001:db8::/32', '::ffff:10.1.0.0/112']);
    for (const ip of ['196.201.214.200', '196.201.212.9', '2001:db8::1', '10.1.2.3']) expect(isAllowedSource(ip, accepted, false)).toBe(true);
    expect(isAllowedSource('196.201.213.1', accepted, false)).toBe(false);
    // Unset (or empty): the operator's published addresses.
    expect(loadConfig({ MOBILEMONEY_CALLBACK_ALLOWLIST: '' }).mobilemoneyCallbackAllowlist).toEqual(loadConfig({}).mobilemoneyCallbackAllowlist);
    expect(loadConfig({}).mobilemoneyCallbackAllowlist.length).toBeGreaterThan(0);
  });
});
