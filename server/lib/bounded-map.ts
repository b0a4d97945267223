/**
 * Sets `key` in a Map kept as a bounded cache: the entry moves to the newest position (a Map iterates in
 * insertion order), and the oldest entries are dropped so that it holds at most `max`.
 */
export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  while (map.size >= max) map.delete(map.keys().next().value as K);
  map.set(key, value);
}
