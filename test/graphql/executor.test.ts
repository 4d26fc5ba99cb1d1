/**
 * The compiled executor (graphql-jit, src/graphql/executor.ts) against graphql-js's
 * execute, the reference: over random operations (selections with aliases, fragments and
 * @skip/@include, valid and refused arguments, literals and variables, variables of the
 * wrong type) both must give the same data, the same nulls and the same errors (message,
 * locations, path, extensions, and the original error the route shapes its answer from).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parse, specifiedRules, validate, type ExecutionResult } from 'graphql';
import { seedTenant, startApp, tokenFor, type TestApp } from '../helpers/app.ts';
import { createModel, insertFacts, uniqueSlug } from './helpers.ts';
import { runs } from '../helpers/property.ts';
import { schema } from '../../src/graphql/schema.ts';
import { executeCompiled, executeReference, type CompiledHolder } from '../../src/graphql/executor.ts';
import type { GraphqlContext } from '../../src/graphql/fact-query.ts';
import { authenticate, type Principal } from '../../src/auth/principal.ts';
import { AppError } from '../../src/errors.ts';

const RUNS = runs(40);

let t: TestApp;
let principal: Principal;
let slug: string;

before(async () => {
  t = await startApp({ RATE_LIMIT_MAX: '1000000' });
  const tenant = await seedTenant(t.deps);
  const token = await tokenFor(t, tenant);
  principal = await authenticate(t.deps.db, t.deps.signingKey, `Bearer ${token}`, Math.floor(Date.now() / 1000));
  slug = uniqueSlug('x');
  const model = await createModel(t.deps, tenant, slug, [
    { name: 'k', type: 'string', is_primary_key: true },
    { name: 'n', type: 'integer' },
  ]);
  const base = Date.now() - 5 * 86_400_000;
  await insertFacts(
    t.deps,
    model,
    Array.from({ length: 7 }, (_, i) => ({ entity_id: `e${i % 4}`, observed_at: base + i * 3_600_000, data: { k: `e${i % 4}`, n: i } })),
  );
});
after(async () => {
  await t?.close();
});

/** The parts of a result the route reads: the data, and per error its JSON and its original error. */
function comparable(r: ExecutionResult): unknown {
  return {
    hasData: 'data' in r,
    data: r.data === undefined ? undefined : JSON.parse(JSON.stringify(r.data)),
    errors: r.errors?.map((e) => {
      const o = e.originalError;
      return {
        json: JSON.parse(JSON.stringify(e.toJSON())),
        original:
          o === undefined ? undefined : o instanceof AppError ? `AppError ${o.code} ${o.detail} ${JSON.stringify(o.source)}` : `${o.name}: ${o.message}`,
      };
    }),
  };
}

const FACT = ['id', 'dataModelId', 'entityId', 'observedAt', 'insertedAt', 'data', '__typename'];
const PAGE = ['hasNextPage', 'hasPreviousPage', 'pageNumber', 'lastPage', 'limit', 'count', '__typename'];

/** An argument: left out, a literal, or a variable (declared with `type`, given `value`). */
const arg = (name: string, type: string, literals: string[], values: unknown[]) =>
  fc.oneof(
    fc.constant(undefined),
    fc.constantFrom(...literals).map((l) => ({ name, literal: l })),
    fc.constantFrom(...values).map((v) => ({ name, type, value: v })),
  );

const caseArb = fc.record({
  slug: fc.constantFrom('own', 'missing', 'bad slug'),
  args: fc.tuple(
    arg('mode', 'String', ['"latest"', '"timeline"', '"sideways"'], ['latest', 'timeline', 'x']),
    arg('limit', 'Int', ['1', '2', '0', '300'], [1, 3, -1, 'ten']),
    arg('offset', 'Int', ['0', '1', '-2'], [0, 2, 1.5]),
    arg('since', 'DateTime', ['"2020-01-01T00:00:00Z"', '"yesterday"'], ['2020-01-01T00:00:00+02:00', 'nope', 5]),
    arg('filters', 'String', ['"[{\\"field\\":\\"n\\",\\"op\\":\\"gt\\",\\"value\\":2}]"', '"[{"'], ['[]', '[{"field":"zz","op":"eq","value":1}]', 7]),
    arg('sort', 'String', ['"entity_id"', '"observed_at"'], ['inserted_at']),
  ),
  page: fc.subarray(PAGE),
  results: fc.option(fc.subarray(FACT, { minLength: 1 }), { nil: undefined }),
  alias: fc.boolean(),
  fragment: fc.boolean(),
  skip: fc.constantFrom(undefined, true, false),
  health: fc.boolean(),
});

type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

function documentOf(c: Case): { text: string; variables: Record<string, unknown> } {
  const decls: string[] = [];
  const variables: Record<string, unknown> = {};
  const args = [`dataModelSlug: ${JSON.stringify(c.slug === 'own' ? slug : c.slug === 'missing' ? 'no-such-model' : 'Not A Slug')}`];
  for (const a of c.args) {
    if (a === undefined) continue;
    if ('literal' in a) args.push(`${a.name}: ${a.literal}`);
    else {
      decls.push(`$${a.name}: ${a.type}`);
      variables[a.name] = a.value;
    }
    if (!('literal' in a)) args.push(`${a.name}: $${a.name}`);
  }
  if (c.skip !== undefined && c.results) {
    decls.push('$s: Boolean!');
    variables.s = c.skip;
  }
  const results = c.results ? `results { ${c.results.join(' ')}${c.skip !== undefined ? ' entityId @skip(if: $s)' : ''} }` : '';
  const pageFields = [...c.page, results].filter((s) => s !== '');
  if (pageFields.length === 0) pageFields.push('limit');
  const body = c.fragment ? '...P' : pageFields.join(' ');
  const root = `${c.alias ? 'q: ' : ''}factQuery(${args.join(', ')}) { ${body} }${c.health ? ' health' : ''}`;
  const text = `query Q${decls.length ? `(${decls.join(', ')})` : ''} { ${root} }${c.fragment ? ` fragment P on PageOfFact { ${pageFields.join(' ')} }` : ''}`;
  return { text, variables };
}

test('the compiled executor answers as graphql-js does: data, nulls and errors', async () => {
  let compared = 0;
  await fc.assert(
    fc.asyncProperty(caseArb, async (c) => {
      const { text, variables } = documentOf(c);
      const document = parse(text);
      assert.deepEqual(validate(schema, document, specifiedRules), [], text);
      const now = new Date();
      const context = (): GraphqlContext => ({ deps: t.deps, principal, models: undefined, now });
      const reference = await executeReference({ schema, entry: { document }, operationName: 'Q', variableValues: variables, contextValue: context() });
      const entry: CompiledHolder = { document };
      const compiled = await executeCompiled({ schema, entry, operationName: 'Q', variableValues: variables, contextValue: context() });
      assert.deepEqual(comparable(compiled), comparable(reference), `${text} ${JSON.stringify(variables)}`);
      // Compiled once per operation, then reused.
      assert.equal(entry.compiled?.size, 1);
      const again = await executeCompiled({ schema, entry, operationName: 'Q', variableValues: variables, contextValue: context() });
      assert.deepEqual(comparable(again), comparable(reference));
      compared++;
    }),
    { numRuns: RUNS },
  );
  assert.equal(compared, RUNS);
});

test('the compiled executor runs graphql-jit (not the fallback) for a valid operation', async () => {
  const document = parse(`query { factQuery(dataModelSlug: ${JSON.stringify(slug)}, limit: 2) { limit results { entityId } } }`);
  const entry: CompiledHolder = { document };
  const r = await executeCompiled({
    schema,
    entry,
    operationName: undefined,
    variableValues: {},
    contextValue: { deps: t.deps, principal, models: undefined, now: new Date() },
  });
  assert.equal(r.errors, undefined);
  assert.equal((r.data as any).factQuery.results.length, 2);
  assert.equal(typeof entry.compiled?.get(''), 'object');
});

test('variables that cannot be coerced are answered with graphql-js words', async () => {
  const document = parse('query ($l: Int) { factQuery(dataModelSlug: "m", limit: $l) { limit } }');
  const args = {
    schema,
    operationName: undefined,
    variableValues: { l: 'ten' },
    contextValue: { deps: t.deps, principal, models: undefined, now: new Date() },
  };
  const compiled = await executeCompiled({ ...args, entry: { document } });
  const reference = await executeReference({ ...args, entry: { document } });
  assert.deepEqual(comparable(compiled), comparable(reference));
  assert.match(compiled.errors![0]!.message, /^Variable "\$l" got invalid value "ten"; Int cannot represent non-integer value: "ten"$/);
});
