/**
 * Verification that does what the connector says (health_operation needs an attached
 * specification and is then called), verification errors that name the method and URL
 * called (without a secret), and unknown operation_refs answered with the operations that
 * exist, at save and at call time, for specifications and for the s3/snowflake drivers.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { CallFailure, connectorCall } from '../../src/connectors/call.ts';
import type { ConnectorRow } from '../../src/connectors/connectors.sql.ts';
import type { ConnectorRuntime } from '../../src/connectors/runtime.ts';
import { listOperations } from '../../src/connectors/operations.ts';
import { API, deliver, save, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider, type MockProvider } from './mock-provider.ts';

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true' });
const mock: MockProvider = await mockProvider();
after(() => mock.close());
const KEY = `key_${'b'.repeat(40)}`;

async function connector(attributes: Record<string, unknown>): Promise<string> {
  const r = await f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { name: 'Api', direction: 'outbound', type: 'http', ...attributes } },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

/** An OpenAPI document with GET /health (getHealth) unless left out, and `count` operations op01, op02... */
function specWith(count: number, health = true): string {
  const paths: Record<string, unknown> = {};
  if (health) paths['/health'] = { get: { operationId: 'getHealth', responses: { 200: { description: 'ok' } } } };
  for (let i = 1; i <= count; i++) {
    paths[`/things/${i}`] = { get: { operationId: `op${String(i).padStart(2, '0')}`, responses: { 200: { description: 'ok' } } } };
  }
  return JSON.stringify({ openapi: '3.0.3', info: { title: 'Things', version: '1' }, paths });
}

async function attach(connectorId: string, raw: string): Promise<string> {
  const r = await f.api.post(`${API}/api_specs`, {
    data: { type: 'api_spec', attributes: { name: 'Things', format: 'json', raw_document: raw, external_connector_id: connectorId } },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

const verify = async (id: string) => {
  const r = await f.api.post(`${API}/external_connectors/${id}/verify`, undefined);
  assert.equal(r.status, 200, r.text);
  return r.body.data.attributes;
};

describe('verify and health_operation', () => {
  it('fails without calling anything while no specification is attached, then calls the operation once one is', async () => {
    const id = await connector({ auth_type: 'api_key', secret: KEY, config: { base_url: `${mock.url}/hv1`, health_operation: 'getHealth' } });
    const before = mock.requests.length;
    const first = await verify(id);
    assert.equal(first.status, 'failing');
    assert.match(first.last_error, /config\.health_operation is "getHealth", but the connector has no api_spec attached: attach the specification/);
    assert.deepEqual(mock.requests.slice(before), [], 'verification called the provider without the health operation');

    const spec = await attach(id, specWith(2));
    mock.script('/hv1/health', { status: 200, body: { up: true } });
    const second = await verify(id);
    assert.equal(second.status, 'verified', JSON.stringify(second));
    assert.equal(second.last_error, null);
    const call = mock.requests.at(-1)!;
    assert.equal(`${call.method} ${call.path}`, 'GET /hv1/health');
    assert.equal(call.headers['x-api-key'], KEY);

    // A new document without the operation: failing, listing what the specification has.
    const patched = await f.api.patch(`${API}/api_specs/${spec}`, { data: { type: 'api_spec', id: spec, attributes: { raw_document: specWith(25, false) } } });
    assert.equal(patched.status, 200, patched.text);
    const n = mock.requests.length;
    const third = await verify(id);
    assert.equal(third.status, 'failing');
    assert.match(third.last_error, /"getHealth" is not an operation of the connector's specification; its operations: op01, op02, .*, op20 and 5 more$/);
    assert.ok(!third.last_error.includes('op21'));
    assert.equal(mock.requests.length, n);
  });

  it('refuses a health_operation that is not a name at write', async () => {
    const r = await f.api.post(`${API}/external_connectors`, {
      data: { type: 'external_connector', attributes: { name: 'x', auth_type: 'none', type: 'http', config: { base_url: mock.url, health_operation: 7 } } },
    });
    assert.equal(r.status, 422, r.text);
    assert.equal(r.body.errors[0].source.pointer, '/data/attributes/config/health_operation');
  });

  it('an error names the method and URL called, without the query string values or the secret', async () => {
    const id = await connector({ auth_type: 'bearer_token', secret: KEY, config: { base_url: `${mock.url}/down/?token=${KEY}&plain=visible-value` } });
    mock.script('/down/', { status: 503, body: { error: `down; you sent Bearer ${KEY}` } });
    const r = await verify(id);
    assert.equal(r.status, 'failing');
    assert.equal(r.last_error, `GET ${mock.url}/down/?token=[redacted]&plain=[redacted]: The provider answered 503`);
    assert.ok(!r.last_error.includes(KEY) && !r.last_error.includes('visible-value'));
    // The provider was called with the query string as configured.
    assert.equal(mock.requests.at(-1)!.path, `/down/?token=${KEY}&plain=visible-value`);
  });

  it('an unreachable provider: the error names the URL too', async () => {
    const id = await connector({ auth_type: 'none', config: { base_url: 'http://127.0.0.1:9/api' } });
    const r = await verify(id);
    assert.equal(r.last_error, 'GET http://127.0.0.1:9/api/: The provider could not be reached (ECONNREFUSED)');
  });

  it('an s3 or snowflake connector names its bucket and endpoint, or its account URL', async () => {
    const s3 = await connector({
      type: 's3',
      auth_type: 'api_key',
      secret: 'not-a-key-1234',
      config: { region: 'us-east-1', bucket: 'orders', endpoint: 'http://127.0.0.1:9', force_path_style: true, access_key_id: 'AKIA1' },
    });
    const r = await verify(s3);
    assert.equal(r.status, 'failing');
    assert.match(r.last_error, /^HeadBucket orders \(http:\/\/127\.0\.0\.1:9\/\): /);
    assert.ok(!r.last_error.includes('not-a-key-1234'));
  });
});

describe('unknown operation_ref', () => {
  it('at save: the first 20 operations of the specification and how many more', async () => {
    const id = await connector({ auth_type: 'none', config: { base_url: `${mock.url}/ops` } });
    await attach(id, specWith(30));
    const r = await save(f, { step_params: [{ key: 'call', type: 'http_request', config: { connector_id: id, operation_ref: 'getThing' } }] });
    assert.equal(r.status, 422, r.text);
    assert.equal(r.body.errors[0].source.pointer, '/data/attributes/step_params/0/config/operation_ref');
    assert.match(
      r.body.errors[0].detail,
      /"getThing" is not an operation of the connector's specification; its operations: getHealth, op01, .*, op19 and 11 more$/,
    );
  });

  it('at save: a connector without a specification says so', async () => {
    const id = await connector({ auth_type: 'none', config: { base_url: `${mock.url}/ops` } });
    const r = await save(f, { step_params: [{ key: 'call', type: 'http_request', config: { connector_id: id, operation_ref: 'getThing' } }] });
    assert.equal(r.status, 422, r.text);
    assert.match(r.body.errors[0].detail, /the connector has no api_spec attached \(attach one, or give method and path\)/);
  });

  it('at save: the s3 and snowflake drivers list their operations', async () => {
    const s3 = await connector({ type: 's3', auth_type: 'api_key', config: { region: 'us-east-1', bucket: 'b', access_key_id: 'A' } });
    const r = await save(f, { step_params: [{ key: 'call', type: 'http_request', config: { connector_id: s3, operation_ref: 'DeleteBucket' } }] });
    assert.equal(r.status, 422, r.text);
    assert.equal(r.body.errors[0].detail, 'An s3 connector performs HeadBucket, ListObjectsV2, GetObject, PutObject: "DeleteBucket" is not one of them');
    const sf = await connector({ type: 'snowflake', auth_type: 'basic_auth', config: { account: 'xy12345', username: 'U' } });
    const r2 = await save(f, {
      step_params: [{ key: 'call', type: 'http_request', config: { connector_id: sf, operation_ref: 'runQuery', body: '{"statement": "select 1"}' } }],
    });
    assert.equal(r2.status, 422, r2.text);
    assert.equal(r2.body.errors[0].detail, 'A snowflake connector performs submitStatement: "runQuery" is not one of them');
  });

  it('at call time: an operation gone from a new version of the specification fails the step, listing what is there', async () => {
    const id = await connector({ auth_type: 'none', config: { base_url: `${mock.url}/gone` } });
    const spec = await attach(id, specWith(3));
    const { tokens } = await saveOk(f, { step_params: [{ key: 'call', type: 'http_request', config: { connector_id: id, operation_ref: 'op03' } }] });
    const patched = await f.api.patch(`${API}/api_specs/${spec}`, { data: { type: 'api_spec', id: spec, attributes: { raw_document: specWith(2) } } });
    assert.equal(patched.status, 200, patched.text);
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, '{}');
    assert.equal(d.status, 202, d.text);
    const run = (await waitForRun(f, d.body.workflow_run_id)).attributes;
    assert.equal(run.status, 'failed');
    assert.equal(run.attempt, 1);
    assert.equal(run.steps[0].error, `"op03" is not an operation of the connector's specification; its operations: getHealth, op01, op02`);
  });

  it('at call time: a driver operation that does not exist lists those that do', () => {
    const row = (type: string): ConnectorRow => ({
      id: '0193a000-0000-7000-8000-000000000001',
      auth_type: 'api_key',
      type,
      direction: 'outbound',
      config: {},
      secret_ciphertext: null,
      updated_at: new Date(0),
      operations: null,
      servers: null,
    });
    const rt = {} as ConnectorRuntime; // the check comes before anything of the runtime is used
    assert.throws(
      () => connectorCall(rt, row('s3'), { operation_ref: 'CopyObject' }, 'k'),
      (err: unknown) =>
        err instanceof CallFailure &&
        !err.transient &&
        err.message === 'An s3 connector performs HeadBucket, ListObjectsV2, GetObject, PutObject: "CopyObject" is not one of them',
    );
    assert.throws(
      () => connectorCall(rt, row('snowflake'), {}, 'k'),
      (err: unknown) => err instanceof CallFailure && err.message === 'A snowflake connector performs submitStatement: give one as operation_ref',
    );
  });

  it('lists at most 20, then says how many more', () => {
    const refs = Array.from({ length: 23 }, (_, i) => `o${i + 1}`);
    assert.equal(listOperations(refs), `${refs.slice(0, 20).join(', ')} and 3 more`);
    assert.equal(listOperations(refs.slice(0, 20)), refs.slice(0, 20).join(', '));
    assert.equal(listOperations([]), 'none');
  });
});
