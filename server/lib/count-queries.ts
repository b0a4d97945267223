/** A database client whose `query` can be wrapped (a pg Client, as knex's and pg's pools create them). */
interface Queryable {
  query: (...args: never[]) => unknown;
}

/**
 * Calls `onQuery` for every query the client sends: each is one round trip to PostgreSQL (BEGIN and
 * COMMIT included). Installed once per connection, when its pool creates it.
 */
export function countQueries(client: Queryable, onQuery: () => void): void {
  const query = client.query.bind(client) as (...args: never[]) => unknown;
  client.query = ((...args: never[]) => {
    onQuery();
    return query(...args);
  }) as Queryable['query'];
}
