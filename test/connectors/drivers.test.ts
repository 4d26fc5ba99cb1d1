/**
 * The s3 and snowflake drivers. s3 runs against a local S3-compatible server (s3rver)
 * started here: verification, put, get and list through http_request steps, and the
 * errors a step sees. No Snowflake account is reachable from here: its configuration,
 * statement building, the literal-statement rule and the error mapping are tested, and a
 * verification that cannot connect fails as it should.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import S3rver from 's3rver';
import { ConnectorConfigError, ProviderUnavailable, RequestProblem } from '../../src/connectors/errors.ts';
import { buildStatement, mapSnowflakeError, snowflakeSettings, statementIsLiteral } from '../../src/connectors/snowflake-sql.ts';
import { assertJsonApiError } from '../helpers/app.ts';
import { API, builderState, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true' });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-s3rver-'));
const s3rver = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir, configureBuckets: [{ name: 'orders', configs: [] }] });
const { port } = (await s3rver.run()) as { port: number };
after(async () => {
  await s3rver.close();
  fs.rmSync(dir, { recursive: true, force: true });
});
const ENDPOINT = `http://127.0.0.1:${port}`;

async function connector(attributes: Record<string, unknown>): Promise<string> {
  const r = await f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { name: 'Store', direction: 'outbound', ...attributes } },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

const s3Connector = (secret = 'S3RVER', bucket = 'orders') =>
  connector({
    provider_slug: 's3-bucket',
    secret,
    config: { region: 'us-east-1', bucket, endpoint: ENDPOINT, force_path_style: true, access_key_id: 'S3RVER' },
  });

async function runWith(steps: unknown[], payload: unknown): Promise<any> {
  const { tokens } = await saveOk(f, { step_params: steps });
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify(payload));
  assert.equal(d.status, 202, d.text);
  return (await waitForRun(f, d.body.workflow_run_id, 20_000)).attributes;
}

describe('s3 (against s3rver)', () => {
  it('verify: HeadBucket with the right key is verified; a wrong secret or a missing bucket is failing, without the secret', async () => {
    const ok = await f.api.post(`${API}/external_connectors/${await s3Connector()}/verify`, undefined);
    assert.equal(ok.body.data.attributes.status, 'verified', ok.text);
    const wrong = await f.api.post(
      `${API}/external_connectors/${await connector({ type: 's3', auth_type: 'api_key', secret: 'not-the-secret', config: { region: 'us-east-1', bucket: 'orders', endpoint: ENDPOINT, force_path_style: true, access_key_id: 'SOMEONE' } })}/verify`,
      undefined,
    );
    assert.equal(wrong.body.data.attributes.status, 'failing', wrong.text);
    assert.match(wrong.body.data.attributes.last_error, /The provider answered 40[03]/);
    assert.ok(!wrong.text.includes('not-the-secret'));
    const missing = await f.api.post(`${API}/external_connectors/${await s3Connector('S3RVER', 'no-such-bucket')}/verify`, undefined);
    assert.equal(missing.body.data.attributes.status, 'failing');
    assert.match(missing.body.data.attributes.last_error, /The provider answered 404/);
  });

  it('put, get and list objects through http_request steps', async () => {
    const id = await s3Connector();
    const key = '"orders/" & payload.id & ".json"';
    const run = await runWith(
      [
        { key: 'put', type: 'http_request', config: { connector_id: id, operation_ref: 'PutObject', params: { key }, body: 'payload' } },
        { key: 'get', type: 'http_request', config: { connector_id: id, operation_ref: 'GetObject', params: { key } } },
        { key: 'list', type: 'http_request', config: { connector_id: id, operation_ref: 'ListObjectsV2', params: { prefix: '"orders/"' } } },
      ],
      { id: 'o-7', total: 12.5 },
    );
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    assert.equal(run.steps[0].output.status, 200);
    assert.ok(run.steps[0].output.headers.etag);
    assert.deepEqual(run.steps[1].output.body, { id: 'o-7', total: 12.5 });
    assert.equal(run.steps[1].output.headers['content-type'], 'application/json');
    assert.deepEqual(
      run.steps[2].output.body.Contents.map((o: any) => o.Key),
      ['orders/o-7.json'],
    );
    assert.equal(run.steps[2].output.body.IsTruncated, false);
  });

  it('a missing object fails the step at once (404); a step without its key cannot be saved', async () => {
    const id = await s3Connector();
    const run = await runWith(
      [{ key: 'get', type: 'http_request', config: { connector_id: id, operation_ref: 'GetObject', params: { key: '"nope.json"' } } }],
      {},
    );
    assert.equal(run.status, 'failed');
    assert.equal(run.attempt, 1);
    assert.match(run.steps[0].error, /The provider answered 404 \(NoSuchKey\)/);
    const r = await f.api.post(
      `${API}/workflows/save_builder_state`,
      builderState(f, { step_params: [{ key: 'get', type: 'http_request', config: { connector_id: id, operation_ref: 'GetObject' } }] }),
    );
    assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/step_params/0/config/params' });
  });

  it('an S3 store that cannot be reached is retried (the run is not failed at once)', async () => {
    const id = await connector({
      type: 's3',
      auth_type: 'api_key',
      secret: 'S3RVER',
      config: { region: 'us-east-1', bucket: 'orders', endpoint: 'http://127.0.0.1:9', force_path_style: true, access_key_id: 'S3RVER' },
    });
    const { tokens } = await saveOk(f, { step_params: [{ key: 'list', type: 'http_request', config: { connector_id: id, operation_ref: 'ListObjectsV2' } }] });
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, '{}');
    const run = (await waitForRun(f, d.body.workflow_run_id, 30_000)).attributes;
    assert.equal(run.status, 'failed');
    assert.equal(run.attempt, 5);
    assert.match(run.steps[0].error, /could not be reached/);
  });
});

describe('snowflake (no account reachable: configuration, statements, errors)', () => {
  const record = (config: Record<string, unknown>, secret: string | undefined = 'pw') => ({
    id: 'c',
    auth_type: 'basic_auth',
    type: 'snowflake',
    config,
    secret,
    updated_at: new Date(),
  });

  it('settings: account, username and the password are required; an access_url obeys the egress rules', () => {
    assert.deepEqual(snowflakeSettings(record({ account: 'xy12345.eu-central-1', username: 'loader', warehouse: 'WH' }), false), {
      account: 'xy12345.eu-central-1',
      username: 'loader',
      password: 'pw',
      warehouse: 'WH',
    });
    assert.throws(() => snowflakeSettings(record({ username: 'u' }), false), ConnectorConfigError);
    assert.throws(() => snowflakeSettings(record({ account: 'evil.com/x', username: 'u' }), false), /account identifier/);
    assert.throws(() => snowflakeSettings({ ...record({ account: 'a', username: 'u' }), secret: undefined }, false), /password/);
    assert.throws(
      () => snowflakeSettings(record({ account: 'a', username: 'u', access_url: 'http://169.254.169.254' }), false),
      /access_url must not point at/,
    );
  });

  it('statements: bindings as an array or the SQL API object; only scalars; the text is never built from values', () => {
    assert.deepEqual(buildStatement({ statement: 'insert into t values (?, ?, ?)', bindings: ['a', 2, null] }), {
      sqlText: 'insert into t values (?, ?, ?)',
      binds: ['a', 2, null],
    });
    assert.deepEqual(buildStatement({ statement: 'select :1, :2', bindings: { 2: { type: 'TEXT', value: 'b' }, 1: { type: 'FIXED', value: '1' } } }), {
      sqlText: 'select :1, :2',
      binds: ['1', 'b'],
    });
    assert.throws(() => buildStatement({ statement: 'select ?', bindings: [{ a: 1 }] }), RequestProblem);
    assert.throws(() => buildStatement({ bindings: [] }), /statement must be SQL text/);
    assert.throws(() => buildStatement('select 1'), RequestProblem);
    assert.equal(statementIsLiteral('{"statement": "insert into t values (?)", "bindings": [payload.a]}'), true);
    assert.equal(statementIsLiteral('{"statement": "insert into t values (\'" & payload.a & "\')"}'), false);
    assert.equal(statementIsLiteral('{"statement": payload.sql}'), false);
    assert.equal(statementIsLiteral('payload'), false);
  });

  it('errors: network trouble is retried, a refused login or statement is not', () => {
    assert.ok(mapSnowflakeError({ code: 401001, name: 'NetworkError' }) instanceof ProviderUnavailable);
    assert.ok(mapSnowflakeError({ code: 390100, name: 'OperationFailedError' }) instanceof ConnectorConfigError);
    assert.ok(mapSnowflakeError({ code: '002003', sqlState: '42S02' }) instanceof RequestProblem);
  });

  it('a step whose statement is built from values cannot be saved; a literal one can', async () => {
    const id = await connector({ provider_slug: 'snowflake-sql', secret: 'pw', config: { account: 'xy12345', username: 'loader' } });
    const step = (body: string) => [{ key: 'sql', type: 'http_request', config: { connector_id: id, operation_ref: 'submitStatement', body } }];
    const r = await f.api.post(
      `${API}/workflows/save_builder_state`,
      builderState(f, { step_params: step('{"statement": "delete from t where id = \'" & payload.id & "\'"}') }),
    );
    assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/step_params/0/config/body' });
    assert.equal(
      (
        await f.api.post(
          `${API}/workflows/save_builder_state`,
          builderState(f, { step_params: step('{"statement": "delete from t where id = ?", "bindings": [payload.id]}') }),
        )
      ).status,
      201,
    );
  });

  it('verify: an account that cannot be reached is failing, saying so', async () => {
    const id = await connector({
      type: 'snowflake',
      auth_type: 'basic_auth',
      secret: 'pw',
      config: { account: 'xy12345', username: 'loader', access_url: 'http://127.0.0.1:9' },
    });
    const r = await f.api.post(`${API}/external_connectors/${id}/verify`, undefined);
    assert.equal(r.body.data.attributes.status, 'failing', r.text);
    assert.match(r.body.data.attributes.last_error, /Snowflake could not be reached \(401001\)/);
  });
});
