/**
 * What a failure tells beyond status and code, with a fake fetch (scripted answers, no
 * server): the JSON:API error's title and source, whether the token exchange failed rather
 * than the call, an attempt's time limit, and an answer that is not JSON.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createClient, TributaryError, type ClientOptions } from '../../packages/client/src/index.ts';

const TOKEN = () => new Response(JSON.stringify({ access_token: 'tok-1', token_type: 'bearer', expires_in: 900 }), { status: 200 });

/** An answer that never comes: the fetch waits until its signal is aborted. */
const never = (init: RequestInit | undefined) =>
  new Promise<Response>((_, reject) => {
    const signal = init?.signal;
    if (!signal) return;
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });

/** A client whose token endpoint and API answer as scripted; no real wait between attempts. */
function scripted(
  token: (init: RequestInit | undefined) => Promise<Response> | Response,
  api: Array<(init: RequestInit | undefined) => Promise<Response> | Response>,
  extra: Partial<ClientOptions> = {},
) {
  const calls: string[] = [];
  const c = createClient({
    baseUrl: 'http://tributary.invalid',
    clientId: 'tbci_x',
    clientSecret: 'tbcs_secret-value',
    sleep: async () => undefined,
    random: () => 0,
    fetch: async (input, init) => {
      const path = new URL(String(input)).pathname;
      calls.push(path);
      if (path === '/api/v1/oauth/token') return token(init);
      const next = api.shift();
      if (!next) throw new Error('no more scripted answers');
      return next(init);
    },
    ...extra,
  });
  return { c, calls };
}

const create = (c: ReturnType<typeof createClient>) => c.create('data_models', { type: 'data_model', attributes: { name: 'n', slug: 's' } });

describe('the error of a JSON:API answer', () => {
  it('carries the title and the source as the server gave them; pointer is the pointer or the parameter', async () => {
    const body = {
      errors: [
        { status: '422', code: 'invalid_request', title: 'Invalid request', detail: 'slug must be lowercase', source: { pointer: '/data/attributes/slug' } },
      ],
    };
    const { c } = scripted(TOKEN, [() => new Response(JSON.stringify(body), { status: 422 })]);
    await assert.rejects(create(c), (err: unknown) => {
      assert.ok(err instanceof TributaryError);
      assert.equal(err.title, 'Invalid request');
      assert.equal(err.detail, 'slug must be lowercase');
      assert.deepEqual(err.source, { pointer: '/data/attributes/slug' });
      assert.equal(err.pointer, '/data/attributes/slug');
      assert.equal(err.tokenExchange, false);
      return true;
    });
    const param = { errors: [{ code: 'invalid_parameter', title: 'Invalid parameter', source: { parameter: 'filter[nope]', other: 1 } }] };
    const { c: c2 } = scripted(TOKEN, [() => new Response(JSON.stringify(param), { status: 400 })]);
    await assert.rejects(c2.list('data_models'), (err: unknown) => {
      assert.ok(err instanceof TributaryError);
      assert.deepEqual(err.source, { parameter: 'filter[nope]' });
      assert.equal(err.pointer, 'filter[nope]');
      assert.equal(err.detail, undefined);
      assert.equal(err.title, 'Invalid parameter');
      return true;
    });
  });

  it('a 2xx answer that is not JSON is a bad_response error, not a SyntaxError', async () => {
    const { c } = scripted(TOKEN, [() => new Response('<html>proxy</html>', { status: 200, headers: { 'x-request-id': 'r-1' } })]);
    await assert.rejects(c.list('data_models'), { name: 'TributaryError', status: 200, code: 'bad_response', requestId: 'r-1', tokenExchange: false });
  });
});

describe('the error of a webhook answer ({"error": "<text>"})', () => {
  const send = (body: string, status: number) => {
    const { c } = scripted(TOKEN, [() => new Response(body, { status, headers: { 'content-type': 'application/json' } })]);
    return c.sendWebhook('tbwh_token', { id: 1 });
  };

  it("detail is the server's text when the body has only it, and its detail member when it says more", async () => {
    await assert.rejects(send('{"error":"Unauthorized"}', 401), { name: 'TributaryError', status: 401, code: 'Unauthorized', detail: 'Unauthorized' });
    await assert.rejects(send('{"error":"Unauthorized","detail":"the signature is older than the tolerance"}', 401), {
      status: 401,
      code: 'Unauthorized',
      detail: 'the signature is older than the tolerance',
    });
    await assert.rejects(send('{"error":"Processing failed","detail":"the body is not JSON"}', 422), {
      status: 422,
      code: 'Processing failed',
      detail: 'the body is not JSON',
    });
    await assert.rejects(send('{"error":"Trigger not found","detail":""}', 404), { status: 404, code: 'Trigger not found', detail: 'Trigger not found' });
  });
});

describe('the token exchange', () => {
  it('a refused exchange says it was the exchange, with the OAuth code and description, never the secret', async () => {
    const { c, calls } = scripted(() => new Response(JSON.stringify({ error: 'invalid_client', error_description: 'Unknown client' }), { status: 401 }), []);
    await assert.rejects(create(c), (err: unknown) => {
      assert.ok(err instanceof TributaryError);
      assert.equal(err.tokenExchange, true);
      assert.equal(err.status, 401);
      assert.equal(err.code, 'invalid_client');
      assert.equal(err.detail, 'Unknown client');
      assert.ok(!err.message.includes('tbcs_secret-value'));
      return true;
    });
    assert.deepEqual(calls, ['/api/v1/oauth/token']);
  });

  it('an exchange answered with something other than JSON, or without a token, is a bad_response of the exchange', async () => {
    const html = scripted(() => new Response('<html>', { status: 200 }), []);
    await assert.rejects(html.c.list('data_models'), { code: 'bad_response', tokenExchange: true });
    const empty = scripted(() => new Response('{}', { status: 200 }), []);
    await assert.rejects(empty.c.list('data_models'), { code: 'bad_response', tokenExchange: true });
  });

  it('an exchange that gets no answer is a no_answer of the exchange', async () => {
    const { c } = scripted(
      () => {
        throw new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
      },
      [],
      { maxAttempts: 2 },
    );
    await assert.rejects(c.list('data_models'), (err: unknown) => {
      assert.ok(err instanceof TributaryError);
      assert.equal(err.code, 'no_answer');
      assert.equal(err.tokenExchange, true);
      assert.equal(err.attempts, 2);
      // The network error is kept: a program can tell a refused connection from a name that does not resolve.
      assert.equal(((err.cause as Error).cause as { code?: string }).code, 'ECONNREFUSED');
      return true;
    });
  });
});

describe('timeoutMs', () => {
  it('an attempt without an answer in time is retried, then fails with code timeout', async () => {
    const { c, calls } = scripted(TOKEN, [never, never], { timeoutMs: 20, maxAttempts: 2 });
    await assert.rejects(create(c), (err: unknown) => {
      assert.ok(err instanceof TributaryError);
      assert.equal(err.status, 0);
      assert.equal(err.code, 'timeout');
      assert.equal(err.attempts, 2);
      assert.match(err.detail ?? '', /no answer within 20 ms/);
      return true;
    });
    assert.deepEqual(calls, ['/api/v1/oauth/token', '/api/json/v1/data_models', '/api/json/v1/data_models']);
  });

  it('the token exchange has the same limit, and says it was the exchange', async () => {
    const { c } = scripted(never, [], { timeoutMs: 20, maxAttempts: 1 });
    await assert.rejects(c.list('data_models'), { code: 'timeout', tokenExchange: true });
  });

  it('a call may lift the limit (timeoutMs: 0), for a long test run', async () => {
    const slow = () =>
      new Promise<Response>((resolve) => setTimeout(() => resolve(new Response(JSON.stringify({ data: { type: 'workflow_test_run' } }), { status: 200 })), 60));
    const { c } = scripted(TOKEN, [slow], { timeoutMs: 20, maxAttempts: 1 });
    const r = await c.testRun('wf-1', { payload: {} }, { timeoutMs: 0 });
    assert.equal(r.data?.type, 'workflow_test_run');
  });

  it("the caller's own signal still aborts at once, not retried", async () => {
    const { c, calls } = scripted(TOKEN, [never, never], { timeoutMs: 10_000 });
    const controller = new AbortController();
    const pending = c.create('data_models', { type: 'data_model', attributes: { name: 'n', slug: 's' } }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 5);
    await assert.rejects(pending, { name: 'AbortError' });
    assert.equal(calls.filter((p) => p.endsWith('/data_models')).length, 1);
  });
});

describe('mapError', () => {
  class Mine extends Error {
    readonly from: TributaryError;
    constructor(from: TributaryError) {
      super(`mine: ${from.code}`);
      this.from = from;
    }
  }
  const notFound = () => new Response(JSON.stringify({ errors: [{ status: '404', code: 'not_found', title: 'Not found' }] }), { status: 404 });
  /** One way to fail each call of the client; a call missing here fails the test below. */
  const calls: Record<string, (c: ReturnType<typeof createClient>) => Promise<unknown>> = {
    list: (c) => c.list('data_models'),
    iterate: async (c) => {
      for await (const _ of c.iterate('data_models')) void _;
    },
    get: (c) => c.get('data_models', 'dm-1'),
    create,
    update: (c) => c.update('data_models', 'dm-1', { type: 'data_model', attributes: { name: 'n' } }),
    delete: (c) => c.delete('data_models', 'dm-1'),
    testRun: (c) => c.testRun('wf-1', { payload: {} }),
    replay: (c) => c.replay('run-1'),
    cancelRun: (c) => c.cancelRun('run-1'),
    bulkReplay: (c) => c.bulkReplay({ status: 'failed' }),
    verifyConnector: (c) => c.verifyConnector('ec-1'),
    connectorRateLimit: (c) => c.connectorRateLimit('ec-1'),
    factQuery: (c) => c.factQuery('{ factQuery(dataModelSlug: "x") { count } }', { dataModelSlug: 'x' }),
    factAggregate: (c) => c.factAggregate('{ factAggregate(dataModelSlug: "x") { groupsCut } }', { dataModelSlug: 'x' }),
    factPages: async (c) => {
      for await (const _ of c.factPages({ dataModelSlug: 'x', mode: 'latest' })) void _;
    },
    facts: async (c) => {
      for await (const _ of c.facts({ dataModelSlug: 'x', mode: 'latest' })) void _;
    },
    sendWebhook: (c) => c.sendWebhook('tbwh_token', { a: 1 }),
    request: (c) => c.request('GET', '/organizations'),
  };

  it('every call of the client rejects with the mapped error, mapped once', async () => {
    const { c: probe } = scripted(TOKEN, []);
    const methods = Object.keys(probe).filter((k) => typeof (probe as unknown as Record<string, unknown>)[k] === 'function');
    assert.deepEqual(methods.sort(), Object.keys(calls).sort(), 'each call of the client has a case here');
    for (const [name, call] of Object.entries(calls)) {
      const mapped: TributaryError[] = [];
      const { c } = scripted(TOKEN, [notFound], { mapError: (err) => (mapped.push(err), new Mine(err)) });
      await assert.rejects(call(c), (err: unknown) => {
        assert.ok(err instanceof Mine, `${name} rejects with the mapped error`);
        assert.equal(err.from.status, 404);
        return true;
      });
      assert.equal(mapped.length, 1, `${name} maps once`);
    }
  });

  it("maps a failed exchange and a page's next(); passes the caller's own abort unchanged", async () => {
    const refused = () => new Response(JSON.stringify({ error: 'invalid_client' }), { status: 401 });
    const { c: noToken } = scripted(refused, [], { mapError: (err) => new Mine(err) });
    await assert.rejects(noToken.list('data_models'), (err: unknown) => err instanceof Mine && err.from.tokenExchange && err.from.code === 'invalid_client');

    const first = () => new Response(JSON.stringify({ data: [], links: { next: '/api/json/v1/data_models?page[offset]=1' } }), { status: 200 });
    const { c } = scripted(TOKEN, [first, notFound, never], { mapError: (err) => new Mine(err) });
    const page = await c.list('data_models');
    await assert.rejects(page.next(), Mine);

    const controller = new AbortController();
    const aborted = c.create('data_models', { type: 'data_model', attributes: { name: 'n', slug: 's' } }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 5);
    await assert.rejects(aborted, { name: 'AbortError' });
  });
});
