/**
 * The floor the create-payment benchmark is compared with: a bare Express 4 + pg handler that validates
 * nothing and inserts one row. Same machine, same PostgreSQL server, same pool size as the service
 * (20), run as its own process like the service.
 *   DATABASE_URL=… PORT=… node --import tsx bench/baseline-server.ts
 */
import { randomUUID } from 'node:crypto';
import express from 'express';
import pg from 'pg';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 20 });
await pool.query(`CREATE TABLE IF NOT EXISTS baseline_payments (
  id uuid PRIMARY KEY, amount text NOT NULL, currency char(3) NOT NULL, idempotency_key text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now())`);

const app = express();
// As the service (server/http/app.ts): no ETag hashing of each body, no X-Powered-By header.
app.disable('x-powered-by');
app.disable('etag');
app.use(express.json());
app.get('/healthz', (_req, res) => {
  res.json({ ok: true });
});
app.post('/payments', async (req, res) => {
  try {
    const { rows } = await pool.query(
      'INSERT INTO baseline_payments (id, amount, currency, idempotency_key) VALUES ($1, $2, $3, $4) RETURNING id, created_at',
      [randomUUID(), String(req.body.amount), String(req.body.currency), String(req.header('idempotency-key'))],
    );
    res.status(201).json({ success: true, data: rows[0] });
  } catch {
    res.status(500).json({ success: false });
  }
});

const server = app.listen(Number(process.env.PORT), '127.0.0.1');
process.once('SIGTERM', () => {
  server.close();
  void pool.end().then(() => process.exit(0));
});
