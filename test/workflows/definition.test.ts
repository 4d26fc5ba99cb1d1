/**
 * The shape checks of a workflow's builder state (src/workflows/definition.ts), without a
 * database: each refusal names the member at fault with a JSON pointer and says what it
 * must be; each step type's valid config is accepted and normalized.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppError } from '../../src/errors.ts';
import type { HttpRequestConfig, WriteFactConfig } from '../../src/db/tables.ts';
import { readDefinition, WORKFLOW_LIMITS, type Definition } from '../../src/workflows/definition.ts';

/** The first step's config, whatever its type. */
const firstConfig = (d: Definition): Partial<WriteFactConfig & HttpRequestConfig & { expression: string; value: string }> =>
  d.steps[0]!.config as Partial<WriteFactConfig & HttpRequestConfig & { expression: string; value: string }>;

const AT = '/data/attributes';
const CONNECTOR = '6F9619FF-8B86-4D01-B42D-00CF4FC964FF';
const ACCOUNT = '0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d';
const OTHER = '11111111-2222-4333-8444-555555555555';

const attrs = (over: Record<string, unknown> = {}) => ({ wf_params: { name: 'Orders' }, step_params: [], trigger_params: [], ...over });
const withStep = (step: unknown) => attrs({ step_params: [step] });
const withConfig = (type: string, config: unknown) => withStep({ key: 's', type, config });
const CONFIG = `${AT}/step_params/0/config`;

/** The refusal readDefinition gives, as the error document would carry it. */
function refusal(input: Record<string, unknown>): { status: number; code: string; pointer: string | undefined; detail: string } {
  try {
    readDefinition(input);
  } catch (err) {
    assert.ok(err instanceof AppError, `not an AppError: ${String(err)}`);
    return { status: err.status, code: err.code, pointer: err.source?.pointer, detail: err.detail };
  }
  assert.fail('the definition was accepted');
}

function refuses(input: Record<string, unknown>, pointer: string, detail: string | RegExp): void {
  const r = refusal(input);
  assert.equal(r.status, 422);
  assert.equal(r.code, 'invalid_request');
  assert.equal(r.pointer, pointer);
  if (typeof detail === 'string') assert.equal(r.detail, detail);
  else assert.match(r.detail, detail);
}

describe('wf_params', () => {
  const P = `${AT}/wf_params`;
  it('refuses each wrong member with its pointer', () => {
    refuses(attrs({ wf_params: undefined }), P, 'wf_params must be an object');
    refuses(attrs({ wf_params: ['Orders'] }), P, 'wf_params must be an object');
    refuses(
      attrs({ wf_params: { name: 'x', owner: 'me' } }),
      `${P}/owner`,
      '"owner" is not a member of wf_params (allowed: name, description, is_active, concurrency, state_key)',
    );
    refuses(attrs({ wf_params: {} }), `${P}/name`, 'name is required');
    refuses(attrs({ wf_params: { name: null } }), `${P}/name`, 'name is required');
    refuses(attrs({ wf_params: { name: 7 } }), `${P}/name`, 'name must be a string');
    refuses(attrs({ wf_params: { name: 'a\0b' } }), `${P}/name`, 'name must be a string');
    refuses(attrs({ wf_params: { name: 'a\ud800' } }), `${P}/name`, 'name must be a string');
    refuses(attrs({ wf_params: { name: ' \t ' } }), `${P}/name`, 'name must not be empty');
    refuses(attrs({ wf_params: { name: 'n'.repeat(201) } }), `${P}/name`, 'name must be at most 200 characters');
    refuses(attrs({ wf_params: { name: 'x', description: 1 } }), `${P}/description`, 'description must be a string');
    refuses(attrs({ wf_params: { name: 'x', description: 'd'.repeat(4001) } }), `${P}/description`, 'description must be at most 4000 characters');
    refuses(attrs({ wf_params: { name: 'x', is_active: 'yes' } }), `${P}/is_active`, 'is_active must be true or false');
  });

  it('accepts the limits exactly, trims the name and defaults the rest', () => {
    assert.deepEqual(readDefinition(attrs({ wf_params: { name: '  Orders ' } })).wf, {
      name: 'Orders',
      description: null,
      is_active: true,
      concurrency: null,
      state_key: null,
    });
    const full = { name: 'n'.repeat(200), description: 'd'.repeat(4000), is_active: false };
    assert.deepEqual(readDefinition(attrs({ wf_params: full })).wf, { ...full, concurrency: null, state_key: null });
    assert.deepEqual(readDefinition(attrs({ wf_params: { name: 'x', description: null } })).wf, {
      name: 'x',
      description: null,
      is_active: true,
      concurrency: null,
      state_key: null,
    });
    assert.equal(readDefinition(attrs({ wf_params: { name: 'x', state_key: 'payload.customer_id' } })).wf.state_key, 'payload.customer_id');
    refuses(attrs({ wf_params: { name: 'x', state_key: 'payload.(' } }), `${P}/state_key`, /state_key/);
    refuses(attrs({ wf_params: { name: 'x', state_key: 7 } }), `${P}/state_key`, /state_key/);
  });
});

describe('step_params', () => {
  const S = `${AT}/step_params`;
  const transform = (key: string) => ({ key, type: 'transform', config: { expression: 'payload' } });
  const KEY_TEXT = 'key must start with a lowercase letter and hold only lowercase letters, digits and underscores (at most 63)';

  it('refuses each wrong step with its pointer', () => {
    refuses(attrs({ step_params: { a: 1 } }), S, 'step_params must be an array');
    refuses(attrs({ step_params: undefined }), S, 'step_params must be an array');
    const many = Array.from({ length: WORKFLOW_LIMITS.maxSteps + 1 }, (_, i) => transform(`s${i}`));
    refuses(attrs({ step_params: many }), S, 'step_params may hold at most 50 steps');
    refuses(withStep('transform'), `${S}/0`, 'a step must be an object {key, type, config}');
    refuses(withStep({ ...transform('a'), name: 'A' }), `${S}/0/name`, '"name" is not a member of a step (allowed: key, type, config)');
    for (const key of [undefined, 1, 'Upper', '1st', '_x', 'with-dash', 'a'.repeat(64)]) refuses(withStep({ ...transform('a'), key }), `${S}/0/key`, KEY_TEXT);
    refuses(attrs({ step_params: [transform('a'), transform('b'), transform('a')] }), `${S}/2/key`, 'key "a" is used by another step of this workflow');
    refuses(
      withStep({ key: 'a', type: 'loop', config: {} }),
      `${S}/0/type`,
      'type must be one of transform, condition, write_fact, http_request, switch, for_each, delay, wait_until, wait_for_delivery, set_state',
    );
    refuses(
      withStep({ key: 'a', config: {} }),
      `${S}/0/type`,
      'type must be one of transform, condition, write_fact, http_request, switch, for_each, delay, wait_until, wait_for_delivery, set_state',
    );
    refuses(withStep({ key: 'a', type: 'transform', config: ['payload'] }), `${S}/0/config`, 'config must be an object');
    // A missing config is an empty one: what it lacks is named.
    refuses(withStep({ key: 'a', type: 'transform' }), `${S}/0/config/expression`, 'expression is required (a JSONata expression)');
  });

  it('accepts the most steps and the longest key, in order', () => {
    const many = Array.from({ length: WORKFLOW_LIMITS.maxSteps }, (_, i) => transform(`s${i}`));
    assert.deepEqual(
      readDefinition(attrs({ step_params: many })).steps.map((s) => s.key),
      many.map((s) => s.key),
    );
    const key = `a${'b_9'.repeat(20)}xy`;
    assert.equal(key.length, 63);
    assert.equal(readDefinition(withStep(transform(key))).steps[0]!.key, key);
  });
});

describe('transform and condition', () => {
  for (const type of ['transform', 'condition']) {
    it(`a ${type} step needs one valid expression`, () => {
      assert.deepEqual(readDefinition(withConfig(type, { expression: '$count(payload.items) > 0' })).steps, [
        { key: 's', type, config: { expression: '$count(payload.items) > 0' } },
      ]);
      refuses(withConfig(type, { expression: 'x', then: 'y' }), `${CONFIG}/then`, `"then" is not a member of a ${type} step's config (allowed: expression)`);
      refuses(withConfig(type, {}), `${CONFIG}/expression`, 'expression is required (a JSONata expression)');
      refuses(withConfig(type, { expression: 3 }), `${CONFIG}/expression`, 'expression must be a JSONata expression (a string)');
      refuses(withConfig(type, { expression: '' }), `${CONFIG}/expression`, 'expression is empty');
      refuses(withConfig(type, { expression: 'payload.(' }), `${CONFIG}/expression`, /^expression does not compile: .+ \(at character \d+\)$/);
      refuses(
        withConfig(type, { expression: '$match(payload.s, /(a+)+$/)' }),
        `${CONFIG}/expression`,
        'expression has a regular expression with a nested quantifier (/(a+)+$/), which can take exponential time',
      );
    });
  }
});

describe('write_fact', () => {
  const base = { data_model_slug: 'orders', mapping: { id: 'payload.id' } };

  it('accepts a mapping or a data expression, with observed_at and for_each', () => {
    assert.deepEqual(readDefinition(withConfig('write_fact', base)).steps[0]!.config, base);
    const data = { data_model_slug: 'a-1', data: 'payload', observed_at: 'payload.at', for_each: 'payload.items', mapping: null };
    assert.deepEqual(readDefinition(withConfig('write_fact', data)).steps[0]!.config, {
      data_model_slug: 'a-1',
      data: 'payload',
      observed_at: 'payload.at',
      for_each: 'payload.items',
    });
    const wide = Object.fromEntries(Array.from({ length: WORKFLOW_LIMITS.maxMappingFields }, (_, i) => [`f${i}`, `payload.f${i}`]));
    assert.deepEqual(firstConfig(readDefinition(withConfig('write_fact', { data_model_slug: 'x', mapping: wide }))).mapping, wide);
  });

  it('refuses each wrong member with its pointer', () => {
    refuses(
      withConfig('write_fact', { ...base, model: 'x' }),
      `${CONFIG}/model`,
      `"model" is not a member of a write_fact step's config (allowed: data_model_slug, mapping, data, observed_at, for_each)`,
    );
    for (const slug of [undefined, 5, '', 'Orders', 'a_b', 'a'.repeat(64)]) {
      refuses(withConfig('write_fact', { ...base, data_model_slug: slug }), `${CONFIG}/data_model_slug`, 'data_model_slug must be the slug of a data model');
    }
    const one = 'a write_fact step needs exactly one of mapping (an object of field: expression) and data (an expression)';
    refuses(withConfig('write_fact', { data_model_slug: 'x' }), CONFIG, one);
    refuses(withConfig('write_fact', { ...base, data: 'payload' }), CONFIG, one);
    refuses(withConfig('write_fact', { data_model_slug: 'x', mapping: 'payload' }), `${CONFIG}/mapping`, 'mapping must be an object of field: expression');
    refuses(withConfig('write_fact', { data_model_slug: 'x', mapping: {} }), `${CONFIG}/mapping`, 'mapping must name at least one field');
    const wide = Object.fromEntries(Array.from({ length: WORKFLOW_LIMITS.maxMappingFields + 1 }, (_, i) => [`f${i}`, 'payload']));
    refuses(withConfig('write_fact', { data_model_slug: 'x', mapping: wide }), `${CONFIG}/mapping`, 'mapping may name at most 200 fields');
    refuses(
      withConfig('write_fact', { data_model_slug: 'x', mapping: { id: 'payload.id', total: 4 } }),
      `${CONFIG}/mapping/total`,
      'total must be a JSONata expression (a string)',
    );
    refuses(withConfig('write_fact', { data_model_slug: 'x', mapping: { id: null } }), `${CONFIG}/mapping/id`, 'id is required (a JSONata expression)');
    refuses(withConfig('write_fact', { data_model_slug: 'x', data: '(' }), `${CONFIG}/data`, /^data does not compile: /);
    refuses(withConfig('write_fact', { ...base, observed_at: '' }), `${CONFIG}/observed_at`, 'observed_at is empty');
    refuses(
      withConfig('write_fact', { ...base, for_each: '$match(x, /a*a*a*b/)' }),
      `${CONFIG}/for_each`,
      /^for_each has a regular expression with repeated quantifiers over the same characters/,
    );
  });
});

describe('http_request', () => {
  const direct = { connector_id: CONNECTOR, method: 'post', path: '/shops/{shop}/orders', params: { shop: 'payload.shop' } };

  it('accepts method and path, normalizing the method and the connector id', () => {
    const config = { ...direct, query: { page: '1' }, headers: { 'X-Trace-Id': 'payload.trace' }, body: 'payload' };
    assert.deepEqual(readDefinition(withConfig('http_request', config)).steps[0], {
      key: 's',
      type: 'http_request',
      config: {
        connector_id: CONNECTOR.toLowerCase(),
        method: 'POST',
        path: '/shops/{shop}/orders',
        params: { shop: 'payload.shop' },
        query: { page: '1' },
        headers: { 'X-Trace-Id': 'payload.trace' },
        body: 'payload',
      },
    });
    for (const method of ['GET', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']) {
      assert.equal(firstConfig(readDefinition(withConfig('http_request', { connector_id: OTHER, method, path: '/' }))).method, method);
    }
  });

  it('accepts an operation_ref, whose params the operation places', () => {
    const config = { connector_id: OTHER, operation_ref: 'POST /orders', params: { id: 'payload.id' }, query: null, headers: null, body: null };
    assert.deepEqual(readDefinition(withConfig('http_request', config)).steps[0]!.config, {
      connector_id: OTHER,
      operation_ref: 'POST /orders',
      params: { id: 'payload.id' },
    });
  });

  it('refuses each wrong member with its pointer', () => {
    refuses(
      withConfig('http_request', { ...direct, url: 'x' }),
      `${CONFIG}/url`,
      `"url" is not a member of an http_request step's config (allowed: connector_id, operation_ref, method, path, params, query, headers, body, paginate)`,
    );
    for (const id of [undefined, 'c1', 42])
      refuses(withConfig('http_request', { ...direct, connector_id: id }), `${CONFIG}/connector_id`, 'connector_id must be the id of an outbound connector');
    const either = 'an http_request step needs either operation_ref or method and path';
    refuses(withConfig('http_request', { connector_id: OTHER }), CONFIG, either);
    refuses(withConfig('http_request', { ...direct, operation_ref: 'op' }), CONFIG, either);
    refuses(withConfig('http_request', { connector_id: OTHER, operation_ref: 'op', path: '/x' }), CONFIG, either);
    refuses(withConfig('http_request', { connector_id: OTHER, operation_ref: 9 }), `${CONFIG}/operation_ref`, 'operation_ref must be a string');
    refuses(
      withConfig('http_request', { connector_id: OTHER, operation_ref: 'o'.repeat(301) }),
      `${CONFIG}/operation_ref`,
      'operation_ref must be at most 300 characters',
    );
    const methods = 'method must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS';
    refuses(withConfig('http_request', { connector_id: OTHER, method: 'FETCH', path: '/' }), `${CONFIG}/method`, methods);
    refuses(withConfig('http_request', { connector_id: OTHER, path: '/' }), `${CONFIG}/method`, methods);
    refuses(withConfig('http_request', { connector_id: OTHER, method: 'GET' }), `${CONFIG}/path`, 'path is required');
    const pathText = 'path must start with / (one), relative to the connector base URL, without spaces or #';
    for (const path of ['orders', '//evil.example/x', '/a b', '/a\tb', '/a#b', 'https://evil.example/']) {
      refuses(withConfig('http_request', { connector_id: OTHER, method: 'GET', path }), `${CONFIG}/path`, pathText);
    }
    refuses(
      withConfig('http_request', { connector_id: OTHER, method: 'GET', path: `/${'p'.repeat(2000)}` }),
      `${CONFIG}/path`,
      'path must be at most 2000 characters',
    );
    refuses(withConfig('http_request', { ...direct, params: {} }), `${CONFIG}/params`, 'the path names {shop}: params must give it');
    refuses(withConfig('http_request', { ...direct, params: undefined }), `${CONFIG}/params`, 'the path names {shop}: params must give it');
    refuses(withConfig('http_request', { ...direct, body: 'payload.(' }), `${CONFIG}/body`, /^body does not compile: /);
  });

  it('refuses wrong params, query and headers with a pointer to the name', () => {
    for (const name of ['params', 'query', 'headers']) {
      refuses(
        withConfig('http_request', { connector_id: OTHER, method: 'GET', path: '/', [name]: ['x'] }),
        `${CONFIG}/${name}`,
        `${name} must be an object of name: expression`,
      );
      const wide = Object.fromEntries(Array.from({ length: WORKFLOW_LIMITS.maxMappingFields + 1 }, (_, i) => [`n${i}`, '1']));
      refuses(
        withConfig('http_request', { connector_id: OTHER, method: 'GET', path: '/', [name]: wide }),
        `${CONFIG}/${name}`,
        `${name} may name at most 200 members`,
      );
      refuses(
        withConfig('http_request', { connector_id: OTHER, method: 'GET', path: '/', [name]: { '': '1' } }),
        `${CONFIG}/${name}/`,
        `a name in ${name} must be 1-128 characters`,
      );
      refuses(
        withConfig('http_request', { connector_id: OTHER, method: 'GET', path: '/', [name]: { ok: 1 } }),
        `${CONFIG}/${name}/ok`,
        'ok must be a JSONata expression (a string)',
      );
    }
    // The name in the pointer is escaped (RFC 6901).
    const long = `a/b~c${'x'.repeat(124)}`;
    refuses(
      withConfig('http_request', { connector_id: OTHER, method: 'GET', path: '/', query: { [long]: '1' } }),
      `${CONFIG}/query/a~1b~0c${'x'.repeat(124)}`,
      'a name in query must be 1-128 characters',
    );
    const reserved =
      '"Authorization" cannot be set by a step (an HTTP header name other than host, content-length, transfer-encoding, connection, authorization, cookie, te, upgrade, proxy-authorization, webhook-id, webhook-timestamp, webhook-signature)';
    refuses(
      withConfig('http_request', { connector_id: OTHER, method: 'GET', path: '/', headers: { Authorization: '"x"' } }),
      `${CONFIG}/headers/Authorization`,
      reserved,
    );
    for (const header of ['Webhook-Signature', 'cookie', 'Host', 'a b', 'x:y', 'h'.repeat(65)]) {
      refuses(
        withConfig('http_request', { connector_id: OTHER, method: 'GET', path: '/', headers: { [header]: '"x"' } }),
        `${CONFIG}/headers/${header}`,
        /cannot be set by a step \(an HTTP header name other than host, /,
      );
    }
    // Not a header, so any name of 1-128 characters will do.
    const query = { 'a b': '1', Authorization: '2', ['q'.repeat(128)]: '3' };
    assert.deepEqual(firstConfig(readDefinition(withConfig('http_request', { connector_id: OTHER, method: 'GET', path: '/', query }))).query, query);
  });
});

describe('trigger_params', () => {
  const T = `${AT}/trigger_params`;
  const hook = (key: string, more: Record<string, unknown> = {}) => ({ key, type: 'webhook', service_account_id: ACCOUNT, ...more });
  const withTrigger = (t: unknown) => attrs({ trigger_params: [t] });

  it('accepts webhook triggers, lowercasing their ids', () => {
    const triggers = readDefinition(
      attrs({
        trigger_params: [hook('a'), hook('b', { id: CONNECTOR, inbound_connector_id: OTHER.toUpperCase(), service_account_id: ACCOUNT.toUpperCase() })],
      }),
    ).triggers;
    assert.deepEqual(triggers, [
      { index: 0, id: null, key: 'a', type: 'webhook', service_account_id: ACCOUNT, inbound_connector_id: null, accept: 'json' },
      { index: 1, id: CONNECTOR.toLowerCase(), key: 'b', type: 'webhook', service_account_id: ACCOUNT, inbound_connector_id: OTHER, accept: 'json' },
    ]);
    const most = Array.from({ length: WORKFLOW_LIMITS.maxTriggers }, (_, i) => hook(`t${i}`));
    assert.equal(readDefinition(attrs({ trigger_params: most })).triggers.length, 20);
  });

  it('refuses each wrong trigger with its pointer', () => {
    refuses(attrs({ trigger_params: null }), T, 'trigger_params must be an array');
    refuses(
      attrs({ trigger_params: Array.from({ length: WORKFLOW_LIMITS.maxTriggers + 1 }, (_, i) => hook(`t${i}`)) }),
      T,
      'trigger_params may hold at most 20 triggers',
    );
    refuses(withTrigger(null), `${T}/0`, 'a trigger must be an object {key, type: "webhook", service_account_id, ...} or {key, type: "schedule", cron, ...}');
    refuses(
      withTrigger(hook('a', { token: 'x' })),
      `${T}/0/token`,
      '"token" is not a member of a webhook trigger (allowed: key, type, service_account_id, inbound_connector_id, accept, id)',
    );
    refuses(
      withTrigger(hook('A')),
      `${T}/0/key`,
      'key must start with a lowercase letter and hold only lowercase letters, digits and underscores (at most 63)',
    );
    refuses(attrs({ trigger_params: [hook('a'), hook('a')] }), `${T}/1/key`, 'key "a" is used by an earlier trigger');
    refuses(withTrigger(hook('a', { type: 'cron' })), `${T}/0/type`, 'type must be one of webhook, schedule');
    refuses(withTrigger(hook('a', { service_account_id: 'me' })), `${T}/0/service_account_id`, 'service_account_id must be the id of a service account');
    refuses(
      withTrigger(hook('a', { inbound_connector_id: 12 })),
      `${T}/0/inbound_connector_id`,
      'inbound_connector_id must be the id of an inbound connector or null',
    );
    for (const accept of ['xml', 'JSON', '', 0, false, ['form']])
      refuses(
        withTrigger(hook('a', { accept })),
        `${T}/0/accept`,
        'accept must be one of json, form (form also takes application/x-www-form-urlencoded bodies)',
      );
    assert.equal((readDefinition(withTrigger(hook('a', { accept: 'form' }))).triggers[0] as { accept: string }).accept, 'form');
    assert.equal((readDefinition(withTrigger(hook('a', { accept: null }))).triggers[0] as { accept: string }).accept, 'json', 'null is the default');
    refuses(withTrigger(hook('a', { id: 'first' })), `${T}/0/id`, 'id must be the id of a trigger of this workflow');
    refuses(attrs({ trigger_params: [hook('a', { id: OTHER }), hook('b', { id: OTHER.toUpperCase() })] }), `${T}/1/id`, 'id is given to an earlier trigger');
  });
});

describe('order', () => {
  it('reads wf_params, then the steps, then the triggers', () => {
    assert.equal(refusal({ wf_params: 1, step_params: 1, trigger_params: 1 }).pointer, `${AT}/wf_params`);
    assert.equal(refusal({ wf_params: { name: 'x' }, step_params: 1, trigger_params: 1 }).pointer, `${AT}/step_params`);
    assert.equal(refusal({ wf_params: { name: 'x' }, step_params: [], trigger_params: 1 }).pointer, `${AT}/trigger_params`);
  });
});

describe('schedule triggers', () => {
  const T = `${AT}/trigger_params`;
  const tick = (key: string, more: Record<string, unknown> = {}) => ({ key, type: 'schedule', cron: '*/5 * * * *', ...more });
  const withTrigger = (t: unknown) => attrs({ trigger_params: [t] });

  it('accepts 5- and 6-field crons, with the timezone and catch_up defaults', () => {
    const triggers = readDefinition(
      attrs({
        trigger_params: [
          tick('a'),
          tick('b', { cron: ' * * * * * * ', timezone: 'Europe/Berlin', catch_up: 'none', id: OTHER.toUpperCase() }),
          { key: 'c', type: 'webhook', service_account_id: ACCOUNT },
        ],
      }),
    ).triggers;
    assert.deepEqual(triggers, [
      { index: 0, id: null, key: 'a', type: 'schedule', cron: '*/5 * * * *', timezone: 'UTC', catch_up: 'latest' },
      { index: 1, id: OTHER, key: 'b', type: 'schedule', cron: '* * * * * *', timezone: 'Europe/Berlin', catch_up: 'none' },
      { index: 2, id: null, key: 'c', type: 'webhook', service_account_id: ACCOUNT, inbound_connector_id: null, accept: 'json' },
    ]);
  });

  it('refuses a wrong schedule with its pointer', () => {
    refuses(withTrigger(tick('a', { cron: undefined })), `${T}/0/cron`, 'cron is required');
    refuses(withTrigger(tick('a', { cron: 5 })), `${T}/0/cron`, 'cron must be a string');
    refuses(withTrigger(tick('a', { cron: 'every day' })), `${T}/0/cron`, /^cron is not a cron expression of 5 fields/);
    refuses(withTrigger(tick('a', { cron: '* * * * * * *' })), `${T}/0/cron`, /^cron is not a cron expression of 5 fields/);
    refuses(withTrigger(tick('a', { cron: '61 * * * *' })), `${T}/0/cron`, /^cron is not a cron expression of 5 fields/);
    refuses(withTrigger(tick('a', { cron: '0 0 30 2 *' })), `${T}/0/cron`, 'cron names no instant (such as 30 February)');
    refuses(withTrigger(tick('a', { timezone: 'Mars/Olympus' })), `${T}/0/timezone`, /^timezone "Mars\/Olympus" is not an IANA time zone name/);
    refuses(withTrigger(tick('a', { timezone: 7 })), `${T}/0/timezone`, 'timezone must be a string');
    refuses(withTrigger(tick('a', { catch_up: 'all' })), `${T}/0/catch_up`, 'catch_up must be one of latest, none');
    refuses(
      withTrigger(tick('a', { service_account_id: ACCOUNT })),
      `${T}/0/service_account_id`,
      '"service_account_id" is not a member of a schedule trigger (allowed: key, type, cron, timezone, catch_up, id)',
    );
    refuses(
      attrs({ trigger_params: [tick('a'), { key: 'a', type: 'webhook', service_account_id: ACCOUNT }] }),
      `${T}/1/key`,
      'key "a" is used by an earlier trigger',
    );
  });
});
