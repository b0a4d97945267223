import type { TestService } from './service.js';

/** A Prometheus text exposition as `name{labels}` → value (labels as the server wrote them). */
export type Samples = Map<string, number>;

/** Parses the Prometheus text format (what /metrics answers). */
export function parsePrometheus(text: string): Samples {
  const samples: Samples = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

/** Sum of every sample of `name` whose labels include all of `labels`. */
export function total(samples: Samples, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const [series, value] of samples) {
    const brace = series.indexOf('{');
    const seriesName = brace < 0 ? series : series.slice(0, brace);
    if (seriesName !== name) continue;
    if (Object.entries(labels).every(([k, v]) => series.includes(`${k}="${v}"`))) sum += value;
  }
  return sum;
}

/** GET /metrics of a test service, parsed. */
export async function scrapeMetrics(service: Pick<TestService, 'http'>): Promise<Samples> {
  const res = await service.http.get('/metrics');
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return parsePrometheus(res.text);
}
