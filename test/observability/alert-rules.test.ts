import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { parser } from '@prometheus-io/lezer-promql';
import type { SyntaxNode } from '@lezer/common';
import { parse as parseYaml } from 'yaml';
import { PAYMENT_STATUSES, PROVIDERS } from '../../contract/index.js';
import { DELIVERY_STATUSES } from '../../contract/webhook-logs.js';
import { CALLBACK_OUTCOMES } from '../../server/http/middleware/callback-metrics.js';
import { PROVIDER_CALL_OUTCOMES } from '../../server/observability/instrument-provider.js';
import { GAUGED_DELIVERY_STATUSES } from '../../server/observability/store-metrics.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * examples/prometheus-alerts.yml as an operator loads it. Prometheus accepts a rule on a metric nobody
 * exports, or a label value nobody sets, and the alert then never fires, silently; so every rule is
 * checked against what the service really exports (its metric registry, which /metrics serves): each
 * expression is PromQL by Prometheus's own grammar (@prometheus-io/lezer-promql), and every metric,
 * label, label value and `$labels` template it uses exists.
 */
interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** Labels Prometheus puts on every scraped series, and the one series it makes itself. */
const TARGET_LABELS = ['job', 'instance'];
const PROMETHEUS_SERIES: Record<string, string[]> = { up: [] };

const rules: Rule[] = (parseYaml(readFileSync(path.resolve('examples', 'prometheus-alerts.yml'), 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

let t: TestService;
/** Every series name the service exports → its metric and label names (a histogram's _bucket also has `le`). */
const exported = new Map<string, { metric: string; labels: string[] }>();
/** The values a label can take, where they are a closed set: by label, or by `metric.label`. */
let closedSets: Record<string, readonly string[]>;

beforeAll(async () => {
  t = await startTestService();
  const { registry } = t.service.container.metrics;
  for (const metric of registry.getMetricsAsArray()) {
    // prom-client keeps a metric's label names on the metric (not in its typings).
    const labels = [...((metric as unknown as { labelNames?: readonly string[] }).labelNames ?? [])];
    if (String(metric.type) === 'histogram') {
      exported.set(`${metric.name}_bucket`, { metric: metric.name, labels: [...labels, 'le'] });
      exported.set(`${metric.name}_count`, { metric: metric.name, labels });
      exported.set(`${metric.name}_sum`, { metric: metric.name, labels });
    } else {
      exported.set(metric.name, { metric: metric.name, labels });
    }
  }
  const census = await t.inContext(() => t.service.container.secretKeyCensus.take());
  const httpStatuses = Array.from({ length: 500 }, (_, i) => String(100 + i));
  closedSets = {
    provider: PROVIDERS,
    'payments.status': PAYMENT_STATUSES,
    'webhook_deliveries.status': GAUGED_DELIVERY_STATUSES,
    'webhook_delivery_attempts_total.status': DELIVERY_STATUSES.filter((status) => status !== 'pending'),
    'stored_secrets.key': Object.keys(census),
    'provider_call_duration_seconds.outcome': PROVIDER_CALL_OUTCOMES,
    'provider_callbacks_total.outcome': CALLBACK_OUTCOMES,
    'http_requests_total.status': httpStatuses,
  };
});
afterAll(async () => {
  await t.stop();
});

interface Selector {
  metric: string;
  matchers: { label: string; op: string; value: string }[];
}

/** A PromQL string literal's value: "…" with Go escapes (as JSON's), or '…' / `…`. */
const unquote = (literal: string) => (literal.startsWith('"') ? (JSON.parse(literal) as string) : literal.slice(1, -1));

/** The expression's syntax errors, the series it selects, and the labels its aggregations keep (null: none aggregates). */
function analyse(expr: string) {
  const tree = parser.parse(expr);
  const errors: string[] = [];
  const selectors: Selector[] = [];
  let kept: Set<string> | null = null;
  const text = (node: SyntaxNode) => expr.slice(node.from, node.to);
  tree.iterate({
    enter(ref) {
      if (ref.type.isError) errors.push(`syntax error at ${ref.from}: ${JSON.stringify(expr.slice(ref.from, ref.from + 20))}`);
      if (ref.name === 'VectorSelector') {
        const node = ref.node;
        const matchers = (node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? []).map((m) => ({
          label: text(m.getChild('LabelName')!),
          op: text(m.getChild('MatchOp')!),
          value: unquote(text(m.getChild('StringLiteral')!)),
        }));
        const name = node.getChild('Identifier');
        selectors.push({ metric: name ? text(name) : '(a selector without a metric name)', matchers });
      }
      if (ref.name === 'AggregateExpr') {
        const grouping = ref.node.getChild('AggregateModifier');
        const by = grouping?.getChild('By') ? (grouping.getChild('GroupingLabels')?.getChildren('LabelName') ?? []).map(text) : [];
        kept = new Set([...(kept ?? []), ...by]);
      }
    },
  });
  return { errors, selectors, kept: kept as Set<string> | null };
}

const labelsOf = (series: string) => exported.get(series)?.labels ?? PROMETHEUS_SERIES[series];

/** Everything in `rule` that Prometheus would load but that could never match what the service exports. */
function problemsOf(rule: Rule): string[] {
  const problems: string[] = [];
  const { errors, selectors, kept } = analyse(rule.expr);
  problems.push(...errors);
  if (selectors.length === 0) problems.push('selects no series');
  for (const { metric, matchers } of selectors) {
    const labels = labelsOf(metric);
    if (!labels) {
      problems.push(`no metric ${metric}`);
      continue;
    }
    for (const { label, op, value } of matchers) {
      if (!labels.includes(label) && !TARGET_LABELS.includes(label)) problems.push(`${metric} has no label ${label}`);
      const values = closedSets[`${exported.get(metric)?.metric ?? metric}.${label}`] ?? closedSets[label];
      if (!values) continue;
      // A regex is anchored, as Prometheus anchors it; each alternative must match a value the service sets.
      const unknown = op.includes('~')
        ? value.split('|').filter((alt) => !values.some((v) => new RegExp(`^(?:${alt})$`).test(v)))
        : values.includes(value) ? [] : [value];
      for (const v of unknown) problems.push(`${metric}{${label}} is never ${JSON.stringify(v)}`);
    }
  }
  for (const label of kept ?? []) {
    if (!TARGET_LABELS.includes(label) && !selectors.some((s) => labelsOf(s.metric)?.includes(label))) problems.push(`grouped by ${label}, which no selected metric has`);
  }
  // Labels a template names must survive the expression: those its aggregations keep, else the series' own.
  const available = kept ?? new Set([...TARGET_LABELS, ...selectors.flatMap((s) => labelsOf(s.metric) ?? [])]);
  for (const [, label] of Object.values(rule.annotations).join(' ').matchAll(/\$labels\.(\w+)/g)) {
    if (!available.has(label!)) problems.push(`the annotation names $labels.${label}, which the expression does not keep`);
  }
  return problems.map((p) => `${rule.alert}: ${p}`);
}

describe('examples/prometheus-alerts.yml', () => {
  it('holds well-formed rules: a unique name, a duration, a severity, a summary and a description each', () => {
    expect(rules.length).toBeGreaterThanOrEqual(10);
    expect(new Set(rules.map((r) => r.alert)).size).toBe(rules.length);
    for (const rule of rules) {
      expect(Object.keys(rule).filter((k) => !['alert', 'expr', 'for', 'labels', 'annotations'].includes(k))).toEqual([]);
      expect(rule.alert).toMatch(/^Payments[A-Z][A-Za-z]+$/);
      if (rule.for !== undefined) expect(rule.for).toMatch(/^\d+[smhd]$/);
      expect(['critical', 'warning']).toContain(rule.labels.severity);
      expect(rule.annotations.summary).toEqual(expect.stringMatching(/\S/));
      expect(rule.annotations.description).toEqual(expect.stringMatching(/\S/));
    }
  });

  it('is valid PromQL that selects only metrics, labels and label values the service exports', () => {
    expect(rules.flatMap(problemsOf)).toEqual([]);
  });

  it('would name each kind of mistake: broken syntax, a renamed metric or label, a value never set, a template label aggregated away', () => {
    const rule = (expr: string, summary = 'x') => ({ alert: 'PaymentsProbe', expr, labels: { severity: 'warning' }, annotations: { summary, description: 'x' } });
    expect(problemsOf(rule('sum(rate(http_requests_total[5m])'))).toEqual([expect.stringMatching(/^PaymentsProbe: syntax error/)]);
    expect(problemsOf(rule('max(webhook_delivery_lag) > 300'))).toEqual(['PaymentsProbe: no metric webhook_delivery_lag']);
    expect(problemsOf(rule('max by (job) (job_queue_lag_seconds{name="x"}) > 300'))).toEqual([
      'PaymentsProbe: job_queue_lag_seconds has no label name',
    ]);
    expect(problemsOf(rule('sum by (provider) (rate(provider_callbacks_total{outcome=~"refused|failed"}[5m])) > 0'))).toEqual([
      'PaymentsProbe: provider_callbacks_total{outcome} is never "refused"',
    ]);
    expect(problemsOf(rule('sum by (route) (rate(provider_callbacks_total[5m])) > 0'))).toEqual(['PaymentsProbe: grouped by route, which no selected metric has']);
    expect(problemsOf(rule('sum by (provider) (rate(provider_callbacks_total[5m])) > 0', 'on {{ $labels.instance }}'))).toEqual([
      'PaymentsProbe: the annotation names $labels.instance, which the expression does not keep',
    ]);
  });

  it('fires on the first count of every counter a rule reads as "any increase": its series start at 0, or the rule catches a new series', async () => {
    // increase()/rate() read a series that first appears at 1 as no change: a counter whose series are born
    // at their first count would let a process's first integrity mismatch, failed callback or dead delivery pass.
    const { registry } = t.service.container.metrics;
    const atBoot = async (metric: string, matchers: Selector['matchers']) =>
      ((await registry.getSingleMetric(metric)?.get())?.values ?? []).some((v) =>
        matchers.every(({ label, op, value }) => (op === '=' ? String(v.labels[label]) === value : true)),
      );
    const silent: string[] = [];
    for (const rule of rules.filter((r) => /\)\s*>\s*0(?![.\d])/.test(r.expr))) {
      for (const inner of rule.expr.matchAll(/(?:increase|rate)\(([^[]+)\[/g)) {
        const [selector] = analyse(inner[1]!).selectors;
        if (!selector || (await atBoot(selector.metric, selector.matchers))) continue;
        const catchesNewSeries = new RegExp(`\\b${selector.metric}\\s+unless\\s+${selector.metric}\\s+offset\\b`).test(rule.expr);
        if (!catchesNewSeries) silent.push(`${rule.alert}: ${selector.metric}`);
      }
    }
    expect(silent).toEqual([]);
  });

  it('is served by metrics whose labels do not collide with the labels Prometheus sets on every series', () => {
    // A metric label named `job` or `instance` would be renamed `exported_job` / `exported_instance` on scrape.
    const colliding = [...exported].filter(([, { labels }]) => labels.some((l) => TARGET_LABELS.includes(l))).map(([name]) => name);
    expect(colliding).toEqual([]);
  });
});
