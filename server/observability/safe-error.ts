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

/**
 * A database error's message quotes the statement and its parameters, and PostgreSQL's own text,
 * detail and `where` quote the offending values (a phone number, a request body): none of it may
 * reach a log. Such errors are logged as their class and SQLSTATE only; any other message is logged
 * unless it quotes SQL. Accepts an Error or the `{ type, message }` objects older call sites pass.
 */
export function safeError(err: unknown): LoggedError {
  if (err === null || typeof err !== 'object') return { type: typeof err, message: String(err).slice(0, MAX_MESSAGE) };
  const e = err as { name?: unknown; type?: unknown; message?: unknown; code?: unknown; sqlState?: unknown; stack?: unknown };
  const type = String(e.name ?? e.type ?? 'Error');
  const sqlState = [e.sqlState, e.code].find((c): c is string => typeof c === 'string' && SQLSTATE.test(c));
  const message = typeof e.message === 'string' ? e.message : '';
  // MikroORM's DriverException family (…Exception) and pg errors (a SQLSTATE) carry the query.
  const fromDatabase = sqlState !== undefined || /Exception$/.test(type) || SQL_TEXT.some((pattern) => pattern.test(message));
  const out: LoggedError = {
    type,
    message: fromDatabase ? `database error${sqlState ? ` ${sqlState}` : ''} (statement and values withheld)` : message.slice(0, MAX_MESSAGE),
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
