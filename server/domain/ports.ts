/** What the domain needs from the job runner; implemented in jobs/ on Agenda. */
export interface DeliveryQueue {
  /** Schedules an immediate delivery attempt for each id (after the outbox transaction committed). */
  enqueue(deliveryIds: readonly string[]): Promise<void>;
}

/** Counts provider reports the integrity check refused; implemented by a prom-client counter. */
export interface IntegrityCounter {
  inc(labels: { provider: string; source: string }): void;
}
