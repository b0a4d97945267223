import type { ChangeFeed, TableChange } from './change-notifications.js';
import { setBounded } from '../lib/bounded-map.js';

interface Entry<V> {
  value: V;
  /** On the monotonic clock (performance.now()): a wall clock stepped back must not keep an entry longer. */
  expiresAt: number;
}

export interface NotifiedCacheOptions<V> {
  /** The tables whose changes (as the feed reports them) may make an entry wrong. */
  tables: readonly string[];
  /** Which merchant an entry belongs to, so a change of one merchant drops only its entries. */
  merchantOf: (key: string, value: V) => string;
  ttlMs: number;
  maxEntries: number;
}

/**
 * Lookups cached in this process only while a change feed vouches for them: served only while the feed
 * is current (else every read goes to the database), dropped on every change notified for their
 * merchant, and all dropped when the feed reconnects. Only found values are kept: an absent row is
 * read again every time, so nothing missing can seem to exist, nor something new seem missing.
 *
 * A load that overlaps an invalidation is returned to its caller but not kept (`epoch`), since it may
 * have read the row before the change committed.
 */
export class NotifiedCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private readonly loading = new Map<string, { epoch: number; promise: Promise<V | null> }>();
  private epoch = 0;

  constructor(
    private readonly feed: ChangeFeed,
    private readonly options: NotifiedCacheOptions<V>,
  ) {
    feed.subscribe((change) => this.onChange(change));
  }

  async get(key: string, load: () => Promise<V | null>): Promise<V | null> {
    if (!this.feed.isCurrent()) return load();
    const hit = this.entries.get(key);
    if (hit && hit.expiresAt > performance.now()) return hit.value;
    // Concurrent misses of one key share one load, unless an invalidation came between them.
    const pending = this.loading.get(key);
    if (pending && pending.epoch === this.epoch) return pending.promise;
    const epoch = this.epoch;
    const promise = load().then((value) => {
      if (value !== null && epoch === this.epoch) this.keep(key, value);
      return value;
    });
    this.loading.set(key, { epoch, promise });
    try {
      return await promise;
    } finally {
      if (this.loading.get(key)?.promise === promise) this.loading.delete(key);
    }
  }

  private keep(key: string, value: V): void {
    setBounded(this.entries, key, { value, expiresAt: performance.now() + this.options.ttlMs }, this.options.maxEntries);
  }

  /**
   * Drops the merchant's entries at once: for the process that made a change, which should not
   * wait for its own notification to read what it wrote.
   */
  dropMerchant(merchantId: string): void {
    this.drop([merchantId]);
  }

  private onChange(change: TableChange): void {
    if (change.table !== '*' && !this.options.tables.includes(change.table)) return;
    this.drop(change.merchantIds);
  }

  /** Drops the entries of these merchants, or every entry when none is named. */
  private drop(merchantIds: readonly string[]): void {
    this.epoch += 1;
    this.loading.clear();
    if (merchantIds.length === 0) {
      this.entries.clear();
      return;
    }
    const merchants = new Set(merchantIds);
    for (const [key, entry] of [...this.entries]) {
      if (merchants.has(this.options.merchantOf(key, entry.value))) this.entries.delete(key);
    }
  }
}
