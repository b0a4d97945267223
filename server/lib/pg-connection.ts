/**
 * Socket settings for every connection the service opens to PostgreSQL (the ORM's pool, Agenda's, the
 * key lock's, the sandbox's, the schema lock and the change listeners), with the connection's other
 * settings always read from DATABASE_URL by pg itself (`connectionString`).
 *
 * TCP keepalive: an idle pooled connection whose path died without a reset (a hard failover, a NAT or
 * firewall that dropped its state) is otherwise kept for hours, and the query sent on it later waits
 * for TCP's retransmissions. Probes start after 30 s of silence; how often they repeat and how many may
 * go unanswered are the kernel's (net.ipv4.tcp_keepalive_intvl and _probes: Node 20 does not set them).
 * A connect that gets no answer fails after 10 s instead of waiting for TCP.
 */
export const PG_SOCKET_OPTIONS = {
  keepAlive: true,
  keepAliveInitialDelayMillis: 30_000,
  connectionTimeoutMillis: 10_000,
} as const;
