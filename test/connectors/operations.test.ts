/**
 * An http_request step's call and URL (src/connectors/operations.ts, buildUrl in
 * src/connectors/runtime.ts), without a provider: placeholders filled and encoded as one
 * path segment, dot segments and empty values refused, an operation's parameters put where
 * it declares them, and a URL that stays under the base URL's path in the template's shape
 * whatever a parameter holds (a property).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ConnectorConfigError, RequestProblem } from '../../src/connectors/errors.ts';
import { buildCall, operationOf, type Scalars, type SpecOperation } from '../../src/connectors/operations.ts';
import { buildUrl } from '../../src/connectors/runtime.ts';
import { runs } from '../helpers/property.ts';

const parts = (params: Scalars, more: { query?: Scalars; headers?: Scalars; body?: unknown } = {}) => ({
  params,
  query: more.query ?? {},
  headers: more.headers ?? {},
  body: more.body,
});
const problem = (message: string | RegExp) => (err: unknown) => {
  assert.ok(err instanceof RequestProblem, `not a RequestProblem: ${String(err)}`);
  if (typeof message === 'string') assert.equal(err.message, message);
  else assert.match(err.message, message);
  return true;
};

describe('operationOf', () => {
  const ops: unknown[] = [
    null,
    'GET /x',
    { operation_ref: 'listOrders', method: 'GET', path: '/orders', params: [] },
    { operation_ref: 'getOrder', method: 'GET', path: '/orders/{id}', params: [] },
  ];
  it('finds the operation by its ref, skipping what is not an object', () => {
    assert.equal(operationOf(ops, 'getOrder')?.path, '/orders/{id}');
    assert.equal(operationOf(ops, 'listOrders')?.path, '/orders');
    assert.equal(operationOf(ops, 'GET /x'), undefined);
    assert.equal(operationOf(ops, 'nope'), undefined);
    assert.equal(operationOf(null, 'getOrder'), undefined);
    assert.equal(operationOf(undefined, 'getOrder'), undefined);
  });
});

describe('buildCall with method and path', () => {
  it('fills each placeholder as one encoded path segment and passes the rest through', () => {
    const call = buildCall(
      { method: 'POST', path: '/shops/{shop}/orders/{id}' },
      parts({ shop: 'a b/c?d#e', id: 'ü%2' }, { query: { q: 'x y' }, headers: { 'X-A': '1' }, body: { n: 1 } }),
      'key-1',
    );
    assert.deepEqual(call, {
      method: 'POST',
      path: '/shops/a%20b%2Fc%3Fd%23e/orders/%C3%BC%252',
      template: '/shops/{shop}/orders/{id}',
      query: { q: 'x y' },
      headers: { 'X-A': '1' },
      body: { n: 1 },
      idempotencyKey: 'key-1',
    });
    // The same name twice takes the same value.
    assert.equal(buildCall({ method: 'GET', path: '/{a}/{a}' }, parts({ a: 'x' }), 'k').path, '/x/x');
    // Params the path does not name are not used.
    assert.equal(buildCall({ method: 'GET', path: '/x' }, parts({ a: 'y' }), 'k').path, '/x');
  });

  it('refuses a missing, empty or dot-segment path parameter', () => {
    assert.throws(
      () => buildCall({ method: 'GET', path: '/shops/{shop}' }, parts({}), 'k'),
      problem('The path needs the path parameter shop, and params gave no value for it'),
    );
    assert.throws(
      () => buildCall({ method: 'GET', path: '/shops/{shop}' }, parts({ shop: '' }), 'k'),
      problem('The path parameter shop is empty; a path parameter must be a non-empty path segment'),
    );
    for (const v of ['.', '..', '%2e', '%2E%2e', '.%2E', '%252e%252e', '%25252e']) {
      assert.throws(
        () => buildCall({ method: 'GET', path: '/shops/{shop}' }, parts({ shop: v }), 'k'),
        problem(`The path parameter shop is ${JSON.stringify(v)}, a dot segment that would move the request to another path; it is refused`),
      );
    }
  });

  it('accepts values that only look like dot segments', () => {
    for (const [v, seg] of [
      ['...', '...'],
      ['.a', '.a'],
      ['a..', 'a..'],
      ['%', '%25'],
      ['%2e%zz', '%252e%25zz'],
      ['v1.2', 'v1.2'],
    ] as const) {
      assert.equal(buildCall({ method: 'GET', path: '/s/{p}' }, parts({ p: v }), 'k').path, `/s/${seg}`, v);
    }
  });

  it('fills a placeholder in the query the path carries as a plain query value', () => {
    assert.equal(buildCall({ method: 'GET', path: '/find/{a}?q={b}&r={b}' }, parts({ a: 'x', b: '../&=' }), 'k').path, '/find/x?q=..%2F%26%3D&r=..%2F%26%3D');
    assert.equal(buildCall({ method: 'GET', path: '/find?q={b}' }, parts({ b: '' }), 'k').path, '/find?q=');
    assert.throws(
      () => buildCall({ method: 'GET', path: '/find?q={b}' }, parts({}), 'k'),
      problem('The path needs the path parameter b, and params gave no value for it'),
    );
  });
});

describe('buildCall with an operation', () => {
  const op: SpecOperation = {
    operation_ref: 'createOrder',
    method: 'POST',
    path: '/shops/{shop}/orders',
    params: [
      { name: 'shop', in: 'path', required: true },
      { name: 'dry_run', in: 'query', required: false },
      { name: 'X-Request-Id', in: 'header', required: false },
      { name: 'page', in: 'query', required: true },
    ],
  };

  it('puts each parameter where the operation declares it', () => {
    const call = buildCall(
      { operation: op },
      parts({ shop: 's/1', dry_run: 'true', 'X-Request-Id': 'r1', page: '2' }, { query: { page: '9', extra: 'e' }, headers: { 'X-B': 'b' }, body: 'raw' }),
      'k',
    );
    assert.deepEqual(call, {
      method: 'POST',
      path: '/shops/s%2F1/orders',
      template: '/shops/{shop}/orders',
      query: { page: '2', extra: 'e', dry_run: 'true' },
      headers: { 'X-B': 'b', 'X-Request-Id': 'r1' },
      body: 'raw',
      idempotencyKey: 'k',
    });
    // An optional parameter without a value is left out.
    assert.deepEqual(buildCall({ operation: op }, parts({ shop: 's', page: '1' }), 'k').query, { page: '1' });
  });

  it('refuses a missing required parameter and one the operation does not declare', () => {
    assert.throws(
      () => buildCall({ operation: op }, parts({ shop: 's' }), 'k'),
      problem('The operation createOrder requires page (query), and params gave no value for it'),
    );
    assert.throws(
      () => buildCall({ operation: op }, parts({ page: '1' }), 'k'),
      problem('The operation createOrder requires shop (path), and params gave no value for it'),
    );
    assert.throws(
      () => buildCall({ operation: op }, parts({ shop: 's', page: '1', limit: '5' }), 'k'),
      problem('limit is not a parameter of the operation createOrder'),
    );
    assert.throws(() => buildCall({ operation: op }, parts({ shop: '..', page: '1' }), 'k'), problem(/^The path parameter shop is "\.\.", a dot segment/));
    // A placeholder the operation's parameters leave out is named with the operation.
    const undeclared: SpecOperation = { operation_ref: 'odd', method: 'GET', path: '/x/{id}', params: [] };
    assert.throws(
      () => buildCall({ operation: undeclared }, parts({}), 'k'),
      problem('The operation odd needs the path parameter id, and params gave no value for it'),
    );
  });
});

describe('buildUrl', () => {
  it('puts the path under the base URL, with or without its slash, and adds the query', () => {
    assert.equal(buildUrl('https://api.example.com/v1', '/orders', undefined).href, 'https://api.example.com/v1/orders');
    assert.equal(buildUrl('https://api.example.com/v1/', 'orders', {}).href, 'https://api.example.com/v1/orders');
    assert.equal(buildUrl('https://api.example.com', '/orders', { a: 'x y', b: '&=?' }).href, 'https://api.example.com/orders?a=x+y&b=%26%3D%3F');
    assert.equal(buildUrl('https://api.example.com/v1', '/find?q=1', { r: '2' }).href, 'https://api.example.com/v1/find?q=1&r=2');
    assert.equal(buildUrl('https://api.example.com/v1', '/s/a%2Fb/o', undefined, '/s/{x}/o').pathname, '/v1/s/a%2Fb/o');
  });

  it('refuses a path that leaves the base URL or its path', () => {
    assert.throws(
      () => buildUrl('https://api.example.com/v1', '///evil.example/x', undefined),
      (e: unknown) => e instanceof ConnectorConfigError && e.message === `The path "///evil.example/x" leaves the connector's base URL`,
    );
    assert.throws(() => buildUrl('https://api.example.com/v1', 'https://evil.example/x', undefined), ConnectorConfigError);
    assert.throws(() => buildUrl('https://api.example.com/v1', '/../admin', undefined), problem(`The path "/../admin" leaves the base URL's path /v1/`));
    assert.throws(() => buildUrl('https://api.example.com/v1/', '/%2e%2e/admin', undefined), problem(/leaves the base URL's path \/v1\//));
    assert.throws(() => buildUrl('https://api.example.com/a/b', '/../../c', undefined), problem(/leaves the base URL's path \/a\/b\//));
  });

  it('refuses a path that does not keep the shape of its template', () => {
    assert.throws(
      () => buildUrl('https://api.example.com/v1', '/s/a/b/o', undefined, '/s/{x}/o'),
      problem('The path "/s/a/b/o" does not keep the shape of "/s/{x}/o"'),
    );
    assert.throws(() => buildUrl('https://api.example.com/v1', '/s/./o', undefined, '/s/{x}/o'), problem(/does not keep the shape/));
    assert.throws(() => buildUrl('https://api.example.com/v1', '/s/x/../o', undefined, '/s/{x}/o'), problem(/does not keep the shape/));
    // The template's own query is not part of its shape.
    assert.equal(buildUrl('https://api.example.com/v1', '/s/x?q=a/b', undefined, '/s/{x}?q={q}').href, 'https://api.example.com/v1/s/x?q=a/b');
  });
});

// Values a step may compute: the characters URL parsing, percent-decoding and dot segments turn on.
const VALUE = fc.string({
  unit: fc.oneof(
    fc.constantFrom('.', '%', '2', 'e', 'E', '5', '/', '\\', '?', '#', ';', '&', '=', ' ', '\t', '@', ':'),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  ),
  maxLength: 12,
});
const BASE = fc.constantFrom(
  'https://api.example.com',
  'https://api.example.com/',
  'https://api.example.com/v1',
  'https://api.example.com/v1/',
  'http://10.0.0.1:8080/a/b/',
);
const TEMPLATE = fc.constantFrom('/shops/{a}', '/shops/{a}/orders/{b}', '/{a}', '/{a}/{b}/x', '/x/{a}?page={b}');

describe('properties', () => {
  it('whatever a parameter holds, the URL stays under the base path in the template shape, or the call is refused', () => {
    fc.assert(
      fc.property(BASE, TEMPLATE, VALUE, VALUE, (base, template, a, b) => {
        let url: URL;
        try {
          const call = buildCall({ method: 'GET', path: template }, parts({ a, b }), 'k');
          url = buildUrl(base, call.path, call.query, call.template);
        } catch (err) {
          assert.ok(err instanceof RequestProblem, `${String(err)}`);
          return;
        }
        const basePath = new URL(base.endsWith('/') ? base : `${base}/`).pathname;
        assert.equal(url.origin, new URL(base).origin);
        assert.ok(url.pathname.startsWith(basePath), url.href);
        const rel = url.pathname.slice(basePath.length).split('/');
        const shape = template.split('?')[0]!.slice(1).split('/');
        assert.equal(rel.length, shape.length, url.href);
        // Each placeholder's segment decodes to the value it was given.
        shape.forEach((s, i) => {
          if (s === '{a}') assert.equal(decodeURIComponent(rel[i]!), a);
          else if (s === '{b}') assert.equal(decodeURIComponent(rel[i]!), b);
          else assert.equal(rel[i], s);
        });
        if (template.includes('?page=')) assert.equal(url.searchParams.get('page'), b);
      }),
      { numRuns: runs(1000) },
    );
  });
});
