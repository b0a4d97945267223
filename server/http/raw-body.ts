import type { Request } from 'express';

/** Keeps the exact request bytes: provider callbacks are verified over the raw body. */
export type RawBodyRequest = Request & { rawBody?: Buffer };
