/**
 * Text the database cannot store (\u0000, an unpaired surrogate) is refused where it
 * enters, with the place it was found: a webhook delivery is 422 Processing failed (never
 * the 503 that asks for a retry), a JSON:API attribute 422 with a pointer, an import line a
 * rejected line, an expression's result a step that fails for good.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fromPgError, AppError } from '../../src/errors.ts';
import { assertJsonApiError } from '../helpers/app.ts';
import { API, createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from './helpers.ts';

const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '1000', RUN_MAX_ATTEMPTS: '3' });
await createModel(f, 'notes', [
  { name: 'id', type: 'string' },
  { name: 'note', type: 'string' },
]);
const hook = await saveOk(f, { step_params: [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }] });
const hookPath = `/api/v1/webhooks/${hook.tokens.hook}`;

async function runCount(): Promise<number> {
  const r = await f.t.deps.db
    .selectFrom('workflow_runs')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('workflow_id', '=', hook.workflow.id)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

describe('a webhook delivery', () => {
  const cases: Array<[string, string, string]> = [
    ['an escaped NUL in the payload', '{"payload":{"note":"a\\u0000b"}}', '/payload/note'],
    ['a lone high surrogate in an array', '{"a":["ok","x\\ud800"]}', '/a/1'],
    ['a lone low surrogate', '{"a":"\\udc00"}', '/a'],
    ['a high surrogate followed by another high one', '{"a":"\\ud83d\\ud83d\\ude00"}', '/a'],
    ['a member name with NUL', '{"payload":{"k\\u0000":1}}', '/payload/k\\u0000'],
    ['a bare string document', '"\\u0000"', 'the document root'],
  ];
  for (const [name, body, at] of cases) {
    it(`is 422 Processing failed with a detail, no Retry-After and no run: ${name}`, async () => {
      const before = await runCount();
      const d = await deliver(f, hookPath, body, { 'idempotency-key': `bad-${name}` });
      assert.equal(d.status, 422, d.text);
      assert.equal(d.body.error, 'Processing failed');
      assert.equal(d.body.detail, `A string or member name holds \\u0000 or an unpaired surrogate, which the database cannot store (at ${at})`);
      assert.equal(d.headers.get('retry-after'), null);
      assert.equal(await runCount(), before);
      // The identity was not used up: the same delivery id with a clean body is accepted.
      const ok = await deliver(f, hookPath, '{"note":"fine"}', { 'idempotency-key': `bad-${name}` });
      assert.equal(ok.status, 202, ok.text);
      assert.equal(ok.body.status, 'accepted');
    });
  }

  it('accepts escaped surrogate pairs, an escaped backslash before u0000, and raw non-ASCII text', async () => {
    for (const body of ['{"e":"\\ud83d\\ude00"}', '{"e":"\\\\u0000"}', '{"e":"\\\\ud800"}', '{"e":"😀 é"}']) {
      const d = await deliver(f, hookPath, body);
      assert.equal(d.status, 202, `${body}: ${d.text}`);
      const run = await waitForRun(f, d.body.workflow_run_id);
      assert.deepEqual(run.attributes.payload, JSON.parse(body));
    }
  });

  it('raw bytes that are not UTF-8 (an encoded surrogate) stay 422 Processing failed', async () => {
    const d = await deliver(f, hookPath, Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]));
    assert.equal(d.status, 422, d.text);
    assert.equal(d.body.error, 'Processing failed');
  });
});

describe('JSON:API documents', () => {
  it('an attribute is 422 with a pointer at it', async () => {
    for (const name of ['a\u0000b', 'x\ud800', '\udc00']) {
      const r = await f.api.post(`${API}/data_models`, { data: { type: 'data_model', attributes: { name, slug: 'unstorable' } } });
      assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/name' });
      assert.match(r.body.errors[0].detail, /\\u0000 or an unpaired surrogate/);
    }
  });

  it('a member name deep in an attribute is 422 with a pointer that spells it', async () => {
    const model = await f.api.get(`${API}/data_models?filter[slug]=notes`);
    const r = await f.api.post(`${API}/data_model_fields`, {
      data: { type: 'data_model_field', attributes: { data_model_id: model.body.data[0].id, name: 'extra', constraints: { a: [1, { 'k\udc00/': true }] } } },
    });
    assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/constraints/a/1/k\\udc00~1' });
  });

  it('a step expression is 422 at the expression', async () => {
    const r = await f.api.post(`${API}/workflows/save_builder_state`, {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          is_new_version: false,
          organization_id: f.tenant.organizationId,
          wf_params: { name: 'Bad', is_active: true },
          step_params: [{ key: 't', type: 'transform', config: { expression: '"a\u0000"' } }],
          trigger_params: [],
        },
      },
    });
    assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/step_params/0/config/expression' });
  });

  it('a connector config is 422 at the value', async () => {
    const r = await f.api.post(`${API}/external_connectors`, {
      data: {
        type: 'external_connector',
        attributes: { name: 'in', auth_type: 'api_key', direction: 'inbound', secret: 'k'.repeat(32), config: { header_name: 'X-Key\ud800' } },
      },
    });
    assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/config/header_name' });
  });

  it("an API spec's title, in JSON or YAML, is 422 at raw_document, saying where in the document", async () => {
    const json = JSON.stringify({ openapi: '3.0.3', info: { title: 'Shop\u0000', version: '1' }, paths: {} });
    const yaml = 'openapi: 3.0.3\ninfo:\n  title: "Shop\\0"\n  version: "1"\npaths: {}\n';
    for (const [format, raw] of [
      ['json', json],
      ['yaml', yaml],
    ]) {
      const r = await f.api.post(`${API}/api_specs`, {
        data: { type: 'api_spec', attributes: { name: 'Shop', format, raw_document: raw, organization_id: f.tenant.organizationId } },
      });
      assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/raw_document' });
      assert.match(r.body.errors[0].detail, /\\u0000 or an unpaired surrogate, which the database cannot store \(at \/info\/title\)/, format);
    }
  });
});

describe('a facts import', () => {
  it('rejects the lines that hold such text, with a pointer, and stores the rest', async () => {
    const lines = [
      JSON.stringify({ data: { id: '1', note: 'fine' }, observed_at: '2024-01-01T00:00:00Z' }),
      JSON.stringify({ data: { id: '2', note: 'a\u0000b' }, observed_at: '2024-01-01T00:00:00Z' }),
      JSON.stringify({ data: { id: '3', note: 'x\ud800' }, observed_at: '2024-01-01T00:00:00Z' }),
    ].join('\n');
    const url = `${f.t.url}/admin/v1/facts/import?${new URLSearchParams({ workspace_id: f.tenant.workspaceId, data_model: 'notes' })}`;
    const res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.t.adminToken}`, 'content-type': 'application/x-ndjson' },
      body: lines,
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    const body = JSON.parse(text).data;
    assert.equal(body.written, 1, text);
    assert.equal(body.rejected, 2, text);
    const detail = 'A string or member name holds \\u0000 or an unpaired surrogate, which the database cannot store';
    assert.deepEqual(body.errors, [
      { line: 2, pointer: '/data/note', detail },
      { line: 3, pointer: '/data/note', detail },
    ]);
  });
});

describe("an expression's result", () => {
  // The expressions spell the characters as JSONata escapes: the saved text itself is storable.
  const steps: Array<[string, unknown[], RegExp]> = [
    ['a transform', [{ key: 'bad', type: 'transform', config: { expression: '{"v": "a\\u0000b"}' } }], /Step bad failed: .*cannot be stored.*\(at \/v\)/],
    [
      'a transform with a lone surrogate',
      [{ key: 'bad', type: 'transform', config: { expression: '"\\ud800"' } }],
      /Step bad failed: .*cannot be stored.*\(at the result itself\)/,
    ],
    [
      'a write_fact mapping',
      [{ key: 'bad', type: 'write_fact', config: { data_model_slug: 'notes', mapping: { id: '"1"', note: '"n\\u0000"' } } }],
      /Step bad failed: .*cannot be stored/,
    ],
  ];
  for (const [name, step_params, error] of steps) {
    it(`fails the step for good (no retry): ${name}`, async () => {
      const { tokens } = await saveOk(f, { wf_params: { name, is_active: true }, step_params });
      const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, '{}');
      assert.equal(d.status, 202, d.text);
      const run = await waitForRun(f, d.body.workflow_run_id);
      assert.equal(run.attributes.status, 'failed', JSON.stringify(run.attributes));
      assert.equal(run.attributes.attempt, 1, 'a permanent failure is not retried');
      assert.match(run.attributes.error, error);
      assert.equal(run.attributes.steps[0].status, 'failed');
    });
  }
});

describe('fromPgError', () => {
  it("turns PostgreSQL's refusals of such text into a 422, never a 503", () => {
    for (const code of ['22P05', '22021']) {
      const e = fromPgError(Object.assign(new Error('unsupported Unicode escape sequence'), { code }));
      assert.ok(e instanceof AppError);
      assert.equal(e.status, 422);
      assert.match(e.detail, /\\u0000 or an unpaired surrogate/);
    }
  });
});
