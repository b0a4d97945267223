import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { openApiDocument } from '../../server/http/openapi.js';

const run = promisify(execFile);
type Json = Record<string, any>;

const doc = JSON.parse(JSON.stringify(openApiDocument())) as Json;
const operations = Object.entries(doc.paths as Record<string, Json>).flatMap(([p, item]) =>
  Object.entries(item).map(([method, op]) => ({ name: `${method.toUpperCase()} ${p}`, op: op as Json })),
);

describe('openapi.json quality', () => {
  it('documents every operation: summary, description, a declared tag, an operationId and its security', () => {
    const tags = new Set((doc.tags as Json[]).map((t) => t.name));
    expect(operations.length).toBeGreaterThan(20);
    for (const { name, op } of operations) {
      expect([name, typeof op.summary, typeof op.description]).toEqual([name, 'string', 'string']);
      expect([name, op.tags.every((t: string) => tags.has(t))]).toEqual([name, true]);
      expect([name, typeof op.operationId]).toEqual([name, 'string']);
      const isCallback = op.tags.includes('Provider callbacks');
      expect([name, op.security]).toEqual([name, isCallback ? [] : [{ ApiKey: [] }]]);
      if (!isCallback) expect([name, op['x-required-scope']]).toEqual([name, expect.stringMatching(/^[a-z]+:(read|write)$/)]);
    }
    expect(new Set(operations.map((o) => o.op.operationId)).size).toBe(operations.length);
  });

  it('gives every body an example and every error response its code in the envelope', () => {
    for (const { name, op } of operations) {
      for (const media of Object.values(op.requestBody?.content ?? {}) as Json[]) {
        expect([name, 'request', media.example !== undefined || media.examples !== undefined]).toEqual([name, 'request', true]);
      }
      const statuses = Object.keys(op.responses);
      expect([name, statuses.some((s) => s.startsWith('2')), statuses.some((s) => s.startsWith('4'))]).toEqual([name, true, true]);
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        expect([name, status, response.description !== status]).toEqual([name, status, true]);
        expect(response.headers['X-Request-Id']).toBeDefined();
        const media = response.content['application/json'];
        expect([name, status, media.example !== undefined || media.examples !== undefined]).toEqual([name, status, true]);
        if (Number(status) >= 400) expect(media.example).toMatchObject({ success: false, error: { code: expect.any(String), request_id: expect.any(String) } });
      }
    }
  });

  it('links the README quick start from the description shown on /docs', () => {
    expect(doc.info.description).toContain('README.md#quick-start');
    expect(doc.info.description).toContain('README.md#sdk');
  });

  it('passes redocly lint (redocly.yaml) with no errors', async () => {
    const cli = path.resolve('node_modules/@redocly/cli/bin/cli.js');
    const { stdout, stderr } = await run(process.execPath, [cli, 'lint', 'openapi.json', '--format=stylish'], { env: { ...process.env, NODE_OPTIONS: '' } });
    expect(`${stdout}\n${stderr}`).toContain('Your API description is valid');
  }, 60_000);
});
