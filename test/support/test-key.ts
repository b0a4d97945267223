/**
 * A fixed key for tests (base64 of 32 bytes); production requires ENCRYPTION_KEY to be set. Its own
 * module: test files that only start processes or CLIs need the key without loading the whole server
 * into jest, as importing it from ./service.js would.
 */
export const TEST_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString('base64');
