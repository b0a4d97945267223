/**
 * PostgreSQL's `$1, $2…` for the `?` placeholders the code's SQL is written with, in order, skipping a
 * `?` inside a quoted literal or identifier; `star` tells whether a `*` appears outside them (`SELECT *`,
 * `RETURNING *`, `t.*`, or merely `count(*)`): a result shape a migration could change under a prepared
 * statement.
 */
export function numberPlaceholders(sql: string): { text: string; star: boolean } {
  let n = 0;
  let text = '';
  let star = false;
  let quote: string | null = null;
  for (const c of sql) {
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === "'" || c === '"') {
      quote = c;
    } else if (c === '?') {
      text += `$${++n}`;
      continue;
    } else if (c === '*') {
      star = true;
    }
    text += c;
  }
  return { text, star };
}
