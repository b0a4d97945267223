/** What a log may say about an error: its kind, a database SQLSTATE, a message free of data, where it was thrown. */
export interface LoggedError {
  type: string;
  message: string;
  code?: string;
  /** The frame that threw (`SecretBox.open (…/secret-box.ts:50:23)`): a location, never a stack trace. */
  at?: string;
}

const MAX_MESSAGE = 500;
/** Statement text as knex puts it in front of a driver message (`insert into "payments" … - invalid …`), values interpolated. */
const SQL_TEXT = [
  /^\s*(select|insert|update|delete|with|merge|create|alter|drop|truncate|copy|lock|explain|call|do)\s/i,
  /\b(insert\s+into|update\s+"?\w+"?\s+set|delete\s+from|select\s[\s\S]*?\sfrom|returning\s)/i,
];
const SQLSTATE = /^[0-9A-Z]{5}$/;
/** A connection that could not be made or broke: the database is down or unreachable, not a statement at fault. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'EPIPE', 'ECONNABORTED']);
/** pg's own words when a connection ends under a query (no SQLSTATE; knex puts the statement in front). */
const CONNECTION_ENDED = /Connection terminated(?: unexpectedly| due to connection timeout)?|Client has encountered a connection error and is not queryable/;
/** Credentials in a connection string (`postgres://user:password@host`), wherever a message quotes one. */
const URL_CREDENTIALS = /\/\/[^/\s:@]+:[^@\s]*@/g;

/**
 * What a database connection failure may say: the network code and the address it was refused at (from
 * the error's fields, never its text), or pg's fixed words for a connection that ended. Null otherwise.
 */
function connectionFailure(e: { code?: unknown; address?: unknown; port?: unknown; hostname?: unknown }, type: string, message: string): string | null {
  if (typeof e.code === 'string' && NETWORK_CODES.has(e.code)) {
    const where = typeof e.address === 'string' ? `${e.address}${typeof e.port === 'number' ? `:${e.port}` : ''}` : typeof e.hostname === 'string' ? e.hostname : '';
    return `database connection failed: ${e.code}${where ? ` (${where})` : ''}`;
  }
  const ended = CONNECTION_ENDED.exec(message)?.[0];
  if (ended) return `database connection failed: ${ended}`;
  return type === 'ConnectionException' ? 'database connection failed' : null;
}

/**
 * A database error's message quotes the statement and its parameters, and PostgreSQL's own text,
 * detail and `where` quote the offending values (a phone number, a request body): none of it may
 * reach a log. Such errors are logged as their class and SQLSTATE only, or, when the connection itself
 * failed, its network code and pg's fixed words; any other message is logged unless it quotes SQL, with
 * a connection string's password masked. Accepts an Error or the `{ type, message }` objects older call sites pass.
 */
export function safeError(err: unknown): LoggedError {
  if (err === null || typeof err !== 'object') return { type: typeof err, message: String(err).slice(0, MAX_MESSAGE) };
  const e = err as { name?: unknown; type?: unknown; message?: unknown; code?: unknown; sqlState?: unknown; stack?: unknown; address?: unknown; port?: unknown; hostname?: unknown };
  const type = String(e.name ?? e.type ?? 'Error');
  const sqlState = [e.sqlState, e.code].find((c): c is string => typeof c === 'string' && SQLSTATE.test(c));
  const message = typeof e.message === 'string' ? e.message : '';
  // MikroORM's DriverException family (…Exception) and pg errors (a SQLSTATE) carry the query.
  const fromDatabase = sqlState !== undefined || /Exception$/.test(type) || SQL_TEXT.some((pattern) => pattern.test(message));
  // An outage must read as one: a connection failure keeps its network code and pg's words, nothing else.
  const connection = fromDatabase && sqlState === undefined ? connectionFailure(e, type, message) : null;
  const out: LoggedError = {
    type,
    message:
      connection ??
      (fromDatabase ? `database error${sqlState ? ` ${sqlState}` : ''} (statement and values withheld)` : message.replace(URL_CREDENTIALS, '//[redacted]@').slice(0, MAX_MESSAGE)),
  };
  if (sqlState) out.code = sqlState;
  else if (typeof e.code === 'string' && /^[A-Z_][A-Z0-9_]{1,40}$/.test(e.code)) out.code = e.code;
  if (typeof e.stack === 'string') {
    // No stack trace reaches a log (the project's rule); the throwing frame tells an operator where to look.
    const frame = e.stack.split('\n').find((line) => line.trim().startsWith('at '));
    if (frame) out.at = frame.trim().slice(3, 300);
  }
  return out;
}
