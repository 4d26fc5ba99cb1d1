/**
 * OpenAPI import without the HTTP layer: Swagger 2.0, OpenAPI 3.0 and 3.1 fixtures
 * normalized into the api_spec fields; fingerprints; the drift report; and hostile
 * documents refused quickly with a pointer, without large allocations.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { importSpec } from '../../src/openapi/import.ts';
import { diffOperations, fingerprint, type NormalizedSpec } from '../../src/openapi/normalize.ts';
import { DocumentProblem, parseSpecText, YAML_MAX_ALIASES } from '../../src/openapi/parse.ts';
import { stringify as yamlStringify } from 'yaml';
import { runs } from '../helpers/property.ts';
import { bigSpec } from '../helpers/big-spec.ts';
import { RUNAWAY_MS } from '../helpers/runaway.ts';

const FIXTURES = path.join(import.meta.dirname, '..', 'fixtures', 'openapi');
const fixture = (name: string) => fs.readFileSync(path.join(FIXTURES, name), 'utf8');
const load = (name: string, allowPrivateEgress = false) => importSpec(fixture(name), name.endsWith('.json') ? 'json' : 'yaml', { allowPrivateEgress });
const op = (spec: NormalizedSpec, ref: string) => {
  const o = spec.operations.find((x) => x.operation_ref === ref);
  assert.ok(o, `no operation ${ref} in ${spec.operations.map((x) => x.operation_ref).join(', ')}`);
  return o;
};

async function refused(text: string, format: 'json' | 'yaml', pattern: RegExp, at?: string): Promise<number> {
  const t0 = performance.now();
  await assert.rejects(importSpec(text, format, { allowPrivateEgress: false }), (err: unknown) => {
    assert.ok(err instanceof DocumentProblem, String(err));
    assert.match(err.message, pattern);
    if (at !== undefined) assert.equal(err.at, at);
    return true;
  });
  return performance.now() - t0;
}

describe('Swagger 2.0', () => {
  it('servers from schemes, host and basePath; securityDefinitions in the 3.x shape', async () => {
    const s = await load('petstore-2.0.json');
    assert.equal(s.openapi_version, '2.0');
    assert.equal(s.title, 'Petstore');
    assert.deepEqual(s.servers, [
      { url: 'https://petstore.example.com/v1', description: null },
      { url: 'http://petstore.example.com/v1', description: null },
    ]);
    assert.deepEqual(s.security_schemes, {
      key: { type: 'apiKey', name: 'api_key', in: 'header' },
      basic: { type: 'http', scheme: 'basic', description: 'user and password' },
      oauth: { type: 'oauth2', flows: { clientCredentials: { scopes: { 'pets:read': 'read pets' }, tokenUrl: 'https://auth.petstore.example.com/token' } } },
    });
  });

  it('operations: operationId or METHOD /path; path-level parameters merged, the operation overriding; body and formData as the request schema', async () => {
    const s = await load('petstore-2.0.json');
    assert.deepEqual(
      s.operations.map((o) => o.operation_ref),
      ['listPets', 'POST /pets', 'getPet', 'uploadPhoto'],
    );
    const get = op(s, 'getPet');
    assert.equal(get.method, 'GET');
    assert.equal(get.path, '/pets/{petId}');
    assert.deepEqual(get.params, [
      { name: 'petId', in: 'path', required: true, schema: { type: 'string' } },
      { name: 'verbose', in: 'query', required: false, schema: { type: 'string', enum: ['yes', 'no'] } },
    ]);
    assert.deepEqual(op(s, 'listPets').params, [{ name: 'limit', in: 'query', required: false, schema: { type: 'integer', maximum: 100 } }]);
    const post = op(s, 'POST /pets');
    assert.deepEqual(post.params, []);
    assert.equal((post.request_schema as any).properties.name.type, 'string');
    assert.deepEqual(op(s, 'uploadPhoto').request_schema, {
      type: 'object',
      properties: { caption: { type: 'string' }, file: { type: 'file' } },
      required: ['file'],
    });
  });

  it('a recursive schema is cut at a $circular marker', async () => {
    const pet = op(await load('petstore-2.0.json'), 'getPet').response_schema as any;
    assert.deepEqual(pet.properties.parent, { $circular: '#/definitions/Pet' });
    assert.deepEqual(pet.properties.tags.items, { type: 'object', properties: { name: { type: 'string' } } });
  });
});

describe('OpenAPI 3.0 and 3.1', () => {
  it('server variables take their defaults; relative servers are kept', async () => {
    const s = await load('shop-3.0.yaml');
    assert.deepEqual(s.servers, [
      { url: 'https://eu.shop.example.com/api', description: 'Regional' },
      { url: '/relative', description: null },
    ]);
  });

  it('allOf and YAML anchors within the limit; request bodies and responses by $ref; +json media types; 2XX', async () => {
    const s = await load('shop-3.0.yaml');
    const create = op(s, 'createProduct');
    const product = create.request_schema as any;
    assert.deepEqual(product.allOf[0].properties.id, { type: 'string' });
    assert.deepEqual(product.allOf[1].required, ['name']);
    assert.deepEqual(create.response_schema, create.request_schema);
    assert.equal(create.request_fingerprint, create.response_fingerprint);
    const get = op(s, 'GET /products/{id}');
    assert.deepEqual(
      get.params.map((p) => [p.name, p.in, p.required, p.schema]),
      [
        ['id', 'path', true, { type: 'string' }],
        ['expand', 'query', true, { type: 'string' }],
      ],
    );
    assert.equal(get.request_schema, null);
    assert.equal(get.request_fingerprint, null);
    assert.deepEqual((op(s, 'getTree').response_schema as any).properties.children.items, { $circular: '#/components/schemas/Node' });
  });

  it('the JSON and the YAML of one document normalize identically', async () => {
    assert.deepEqual(await load('shop-3.0.json'), await load('shop-3.0.yaml'));
  });

  it('3.1: type arrays, and $ref siblings applied over the target', async () => {
    const s = await load('notes-3.1.yaml');
    assert.equal(s.openapi_version, '3.1.0');
    const note = (op(s, 'listNotes').response_schema as any).items;
    assert.deepEqual(note.properties.text, { type: ['string', 'null'] });
    assert.deepEqual(note.properties.next, { $circular: '#/components/schemas/Note' });
  });
});

describe('fingerprints and drift', () => {
  it('a fingerprint is the SHA-256 of the canonical JSON: key order does not change it, a schema change does', () => {
    const a = { type: 'object', properties: { b: { type: 'string' }, a: { type: 'integer', minimum: 1 } } };
    const b = { properties: { a: { minimum: 1, type: 'integer' }, b: { type: 'string' } }, type: 'object' };
    assert.equal(fingerprint(a), fingerprint(b));
    assert.match(fingerprint(a)!, /^[0-9a-f]{64}$/);
    assert.notEqual(fingerprint(a), fingerprint({ ...a, required: ['a'] }));
    assert.equal(fingerprint(null), null);
  });

  it('property: any reordering of members keeps the fingerprint; changing a leaf changes it', () => {
    const shuffle = (v: unknown, seed: number): unknown => {
      if (Array.isArray(v)) return v.map((x, i) => shuffle(x, seed + i));
      if (v && typeof v === 'object') {
        const entries = Object.entries(v);
        entries.sort((x, y) => ((x[0].length * 31 + seed) % 7) - ((y[0].length * 31 + seed) % 7) || (seed % 2 ? 1 : -1));
        return Object.fromEntries(entries.map(([k, x]) => [k, shuffle(x, seed * 3 + 1)]));
      }
      return v;
    };
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), fc.integer({ min: 0, max: 1000 }), (value, seed) => {
        assert.equal(fingerprint({ v: shuffle(value, seed) }), fingerprint({ v: value }));
        assert.notEqual(fingerprint({ v: value, extra: seed }), fingerprint({ v: value }));
      }),
      { numRuns: runs(200) },
    );
  });

  it('the drift report: operations added, removed, and changed where a fingerprint differs', async () => {
    const before = await load('shop-3.0.yaml');
    const text = fixture('shop-3.0.yaml')
      .replace('            price: { type: number, nullable: true }', '            price: { type: string }')
      .replace('  /tree:\n    get:\n      operationId: getTree', '  /forest:\n    get:\n      operationId: getForest');
    const after = await importSpec(text, 'yaml', { allowPrivateEgress: false });
    assert.deepEqual(diffOperations(before.operations, after.operations), {
      added: ['getForest'],
      removed: ['getTree'],
      changed: [
        { operation_ref: 'createProduct', request: true, response: true },
        { operation_ref: 'GET /products/{id}', request: false, response: true },
      ],
    });
    assert.deepEqual(diffOperations(before.operations, before.operations), { added: [], removed: [], changed: [] });
  });
});

describe('parsing', () => {
  it('property: any JSON document reads the same from its JSON and from its YAML', () => {
    const key = fc.string({ minLength: 1, maxLength: 8 }).filter((k) => !['__proto__', 'constructor', 'prototype', '<<', '$ref'].includes(k));
    const value = fc.letrec((tie) => ({
      leaf: fc.oneof(
        fc.string({ maxLength: 20 }),
        fc.integer(),
        fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Object.is(d, -0)),
        fc.boolean(),
        fc.constant(null),
      ),
      node: fc.oneof({ depthSize: 'small' }, tie('leaf'), fc.array(tie('node'), { maxLength: 4 }), fc.dictionary(key, tie('node'), { maxKeys: 4 })),
    })).node;
    fc.assert(
      fc.property(fc.dictionary(key, value, { maxKeys: 6 }), (doc) => {
        assert.deepEqual(parseSpecText(yamlStringify(doc, { aliasDuplicateObjects: false }), 'yaml'), parseSpecText(JSON.stringify(doc), 'json'));
      }),
      { numRuns: runs(200) },
    );
  });
});

describe('cost', () => {
  it('the work of an import grows linearly with the operations (5,000 and 20,000), in YAML and in JSON', async () => {
    for (const format of ['yaml', 'json'] as const) {
      const steps = async (n: number) => {
        const work = { steps: 0 };
        const spec = await importSpec(bigSpec(n, format), format, { allowPrivateEgress: false, work });
        assert.equal(spec.operations.length, n);
        return work.steps;
      };
      const small = await steps(5_000);
      const large = await steps(20_000);
      // Four times the operations: four times the work, give or take the fixed part; a quadratic step would be 16 times.
      assert.ok(large <= 4.5 * small, `${format}: ${small} steps for 5,000 operations, ${large} for 20,000`);
    }
  });
});

describe('refused documents', () => {
  const mini = (extra: string) => `openapi: 3.0.3\ninfo: { title: t, version: '1' }\npaths: {}\n${extra}`;

  it('a $ref outside the document (file, http, relative) is refused with its pointer, and nothing is fetched', async () => {
    for (const ref of ['./other.yaml#/components/schemas/X', 'https://attacker.example/x.json', 'file:///etc/passwd', '/etc/passwd']) {
      const doc = JSON.stringify({
        openapi: '3.0.3',
        info: { title: 't', version: '1' },
        paths: { '/a': { get: { responses: { 200: { description: 'x', content: { 'application/json': { schema: { $ref: ref } } } } } } } },
      });
      await refused(doc, 'json', /points outside the document/, '/paths/~1a/get/responses/200/content/application~1json/schema/$ref');
    }
  });

  it('a YAML alias bomb is refused without expanding it', async () => {
    const lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]'];
    for (let i = 1; i < 12; i++)
      lines.push(
        `${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(10)
          .fill(`*${String.fromCharCode(96 + i)}`)
          .join(',')}]`,
      );
    const before = process.memoryUsage().heapUsed;
    const ms = await refused(mini(`x-bomb:\n${lines.map((l) => `  ${l}`).join('\n')}\n`), 'yaml', new RegExp(`more than ${YAML_MAX_ALIASES} aliases`));
    assert.ok(process.memoryUsage().heapUsed - before < 64 * 1024 * 1024);
    assert.ok(ms < RUNAWAY_MS, `took ${ms} ms`);
  });

  it('100,000 levels of nesting (JSON, YAML flow, YAML block) are refused, not walked without end', async () => {
    const n = 100_000;
    const cases: Array<[string, 'json' | 'yaml']> = [
      [`{"openapi":"3.0.3","x":${'['.repeat(n)}${']'.repeat(n)}}`, 'json'],
      [mini(`x: ${'['.repeat(n)}${']'.repeat(n)}\n`), 'yaml'],
      [mini(`x: ${'- '.repeat(n)}1\n`), 'yaml'],
    ];
    for (const [text, format] of cases) {
      const ms = await refused(text, format, /deeper than 64 levels|not valid YAML/);
      assert.ok(ms < RUNAWAY_MS, `${format} took ${ms} ms`);
    }
  });

  it('custom tags, merge keys and prototype member names are refused', async () => {
    await refused(mini('x: !!js/function "function () {}"\n'), 'yaml', /tags other than the core schema|does not accept/);
    await refused(mini('x: !custom 1\n'), 'yaml', /tags other than the core schema|does not accept/);
    await refused(mini('base: &b { a: 1 }\nx:\n  <<: *b\n  c: 2\n'), 'yaml', /merge keys/);
    await refused(mini('x:\n  __proto__: { polluted: true }\n'), 'yaml', /member name __proto__/, '/x/__proto__');
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  it('not a document of a supported version, not valid, or not the declared format: 422 texts', async () => {
    await refused('{"openapi": "4.0.0", "info": {}}', 'json', /not supported/, '/openapi');
    await refused('{"swagger": "1.2"}', 'json', /not supported/, '/swagger');
    await refused('{"title": "x"}', 'json', /neither openapi/);
    await refused('openapi: 3.0.3\n', 'json', /not valid JSON/);
    await refused('{"openapi": "3.0.3", "info": {"title": "t"}, "paths": {}}', 'json', /not a valid OpenAPI 3\.0\.3 document/);
    await refused('[1, 2]', 'json', /must be an object/);
    await refused('a: [', 'yaml', /not valid YAML/);
    await refused(mini('paths: {}\n'), 'yaml', /not valid YAML/);
  });

  it('servers on private, loopback, link-local or metadata addresses are refused unless private egress is allowed', async () => {
    for (const url of [
      'http://127.0.0.1:8080',
      'http://localhost/api',
      'http://169.254.169.254/latest',
      'http://[::ffff:10.0.0.1]/',
      'http://0x7f000001/',
      'http://2130706433/',
    ]) {
      const doc = JSON.stringify({ openapi: '3.0.3', info: { title: 't', version: '1' }, servers: [{ url: 'https://ok.example.com' }, { url }], paths: {} });
      await refused(doc, 'json', /points at a (loopback|local)/, '/servers/1/url');
      const allowed = await importSpec(doc, 'json', { allowPrivateEgress: true });
      assert.equal(allowed.servers.length, 2);
    }
    await refused(JSON.stringify({ swagger: '2.0', info: { title: 't', version: '1' }, host: '10.1.2.3', paths: {} }), 'json', /points at a loopback/, '/host');
  });

  it('a schema that expands without end is cut: refs past the budget stay as $ref', async () => {
    // Each level refers to the next twice: 2^20 nodes if expanded in full.
    const schemas: Record<string, unknown> = {};
    for (let i = 0; i < 20; i++)
      schemas[`L${i}`] = { type: 'object', properties: { a: { $ref: `#/components/schemas/L${i + 1}` }, b: { $ref: `#/components/schemas/L${i + 1}` } } };
    schemas.L20 = { type: 'string' };
    const doc = JSON.stringify({
      openapi: '3.0.3',
      info: { title: 't', version: '1' },
      components: { schemas },
      paths: { '/x': { get: { responses: { 200: { description: 'x', content: { 'application/json': { schema: { $ref: '#/components/schemas/L0' } } } } } } } },
    });
    const s = await importSpec(doc, 'json', { allowPrivateEgress: false });
    // The work done: 2^20 nodes expanded would be tens of megabytes of text.
    const text = JSON.stringify(s.operations[0]!.response_schema);
    assert.ok(text.length < 2_000_000, `${text.length} characters`);
    assert.match(text, /"\$ref":"#\/components\/schemas\/L\d+"/);
  });
});
