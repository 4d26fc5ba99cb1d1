/**
 * What compileExpression (src/expressions/expressions.ts) refuses when a workflow is saved,
 * and what it must let through: the length and emptiness bounds, syntax errors with their
 * position, and regular expressions of the three risky shapes (nested quantifiers, a
 * quantified alternation, three quantified copies of one atom), while the ordinary safe
 * ones a workflow uses are accepted.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { compileExpression, describe as describeError, EXPRESSION_LIMITS, riskyRegex } from '../../src/expressions/expressions.ts';
import { runs } from '../helpers/property.ts';

function reason(text: string): string {
  const r = compileExpression(text);
  assert.equal(r.ok, false, `${JSON.stringify(text.slice(0, 80))} was accepted`);
  return (r as { reason: string }).reason;
}

const accepted = (text: string) =>
  assert.equal(
    compileExpression(text).ok,
    true,
    `${JSON.stringify(text.slice(0, 80))} was refused: ${compileExpression(text).ok ? '' : (compileExpression(text) as { reason: string }).reason}`,
  );

describe('compileExpression', () => {
  it('refuses an expression longer than the limit, and accepts one at it', () => {
    const at = `"${'a'.repeat(EXPRESSION_LIMITS.maxLength - 2)}"`;
    assert.equal(at.length, 10_000);
    accepted(at);
    assert.equal(reason(`${at} `), 'is longer than 10000 characters');
  });

  it('refuses an empty or blank expression', () => {
    for (const text of ['', ' ', '\n\t ']) assert.equal(reason(text), 'is empty');
  });

  it('refuses what does not compile, saying where', () => {
    assert.equal(reason('1 +'), 'does not compile: Unexpected end of expression (at character 3)');
    assert.match(reason('payload.(a'), /^does not compile: .+ \(at character \d+\)$/);
    assert.match(reason('$match(x, /unclosed'), /^does not compile: /);
  });

  it('refuses each risky regular expression shape, naming it and the expression', () => {
    assert.equal(reason('$match(payload.s, /(a+)+$/)'), 'has a regular expression with a nested quantifier (/(a+)+$/), which can take exponential time');
    assert.equal(
      reason('$replace(payload.s, /^(a|aa)+$/, "")'),
      'has a regular expression with a quantified alternation (/^(a|aa)+$/), which can take exponential time',
    );
    assert.equal(
      reason('$contains(payload.s, /a*a*a*b/)'),
      'has a regular expression with repeated quantifiers over the same characters (/a*a*a*b/), which can take exponential time',
    );
    // Found wherever it stands in the expression: inside a function, a path, a condition.
    assert.match(reason('function($v) { $split($v, /(x*)*y/) }("a")'), /nested quantifier/);
    assert.match(reason('payload.items[$match(name, /([a-z]+)*$/)]'), /nested quantifier/);
    assert.match(reason('payload.ok ? "a" : $match(payload.s, /(b|bb)*c/)'), /quantified alternation/);
  });

  it('accepts ordinary expressions, the bounded $pad and safe regular expressions', async () => {
    for (const text of [
      'payload',
      '$count(payload.items) > 0',
      'steps.normalize.total * 2',
      '{"id": payload.id, "at": $now()}',
      '$match(payload.s, /^[a-z]+$/)',
      '$replace(payload.d, /\\d{4}-\\d{2}/, "")',
      '$pad("x", 5, "-")',
    ])
      accepted(text);
    const r = compileExpression('$pad(payload, -4, "*")');
    assert.ok(r.ok);
    assert.equal(await r.compiled.evaluate({ payload: 'ab' }), '**ab');
    await assert.rejects(
      async () => (compileExpression('$pad("x", 100001)') as { ok: true; compiled: { evaluate(i: unknown): Promise<unknown> } }).compiled.evaluate({}),
      /\$pad width 100001 is beyond 100000/,
    );
  });
});

describe('riskyRegex', () => {
  it('names the shape of each risky pattern', () => {
    for (const r of ['(a+)+', '(a*)*b', '(\\d+)*x', '([a-z]+){2,}', '(?:a+)+$']) assert.equal(riskyRegex(r), 'a nested quantifier', r);
    for (const r of ['(a|aa)+', '(a|b)*c', '(x|xy){1,}z', '(?:cat|dog)+', '(a|b)  {3,9}']) assert.equal(riskyRegex(r), 'a quantified alternation', r);
    for (const r of ['a*a*a*b', '\\d+\\d+\\d+', '[ab]*[ab]+[ab]*c', '.+.*.+']) assert.equal(riskyRegex(r), 'repeated quantifiers over the same characters', r);
  });

  it('lets an optional group holding a quantifier through: it repeats nothing', () => {
    for (const r of ['(\\d{2}:)?\\d{2}', '^\\w+(?:\\.[a-z]+)?$', '(a+)?b', '(a+)??b']) assert.equal(riskyRegex(r), undefined, r);
    // ...but an optional group inside a repeated one is still a nested quantifier.
    assert.equal(riskyRegex('((a+)?)+'), 'a nested quantifier');
  });

  it('lets a group of alternatives through when it is not repeated', () => {
    for (const r of ['\\.(jpg|png|gif)$', '(a|b)?', '(a|b){2}', '^(GET|POST) /', '\\d+\\d+', 'a+b+a+']) assert.equal(riskyRegex(r), undefined, r);
  });
});

// Atoms a workflow's regular expressions are made of, and the separators between them.
const ATOM = fc.constantFrom('[a-z]', '[A-Z]', '[0-9]', '\\d', '\\w', '\\s', '[^@]', '[a-f0-9]', 'x', 'Q', '.');
const QUANT = fc.constantFrom('', '?', '+', '*', '{2}', '{4}', '{1,3}', '{2,}');
const SEP = fc.constantFrom('-', ':', '@', '_', '\\.', ',', '#', ' ');
const SUFFIX = fc.constantFrom('', '$', '\\.(jpg|png)$', '(?:-x)?$');

/** Safe patterns like /^[a-z]+$/ and /\d{4}-\d{2}/: quantified atoms with separators, anchors, an unrepeated alternation. */
const safeRegex = fc
  .tuple(fc.boolean(), fc.array(fc.tuple(ATOM, QUANT), { minLength: 1, maxLength: 6 }), fc.array(SEP, { minLength: 6, maxLength: 6 }), SUFFIX)
  .map(([anchored, parts, seps, suffix]) => `${anchored ? '^' : ''}${parts.map(([a, q], i) => `${i > 0 ? seps[i]! : ''}${a}${q}`).join('')}${suffix}`);

const REPEAT = fc.constantFrom('+', '*', '{2,}', '{1,}');

describe('properties', () => {
  it('ordinary safe regular expressions are accepted', () => {
    fc.assert(
      fc.property(safeRegex, (re) => {
        assert.equal(riskyRegex(re), undefined);
        const r = compileExpression(`$match(payload.s, /${re}/)`);
        assert.ok(r.ok, r.ok ? '' : r.reason);
      }),
      { numRuns: runs(300), examples: [['^[a-z]+$'], ['\\d{4}-\\d{2}'], ['^[A-Z]{2}\\d{2}[A-Z0-9]{4}$'], ['^#?[0-9a-f]{6}$'], ['^[^@]+@[^@]+$']] },
    );
  });

  it('a repeated group holding a quantifier is refused as a nested quantifier', () => {
    fc.assert(
      fc.property(
        ATOM,
        REPEAT,
        REPEAT,
        fc.boolean(),
        fc.string({ unit: fc.constantFrom('x', 'y', '-'), maxLength: 3 }),
        (atom, inner, outer, capture, tail) => {
          const re = `(${capture ? '' : '?:'}${atom}${inner})${outer}${tail}`;
          assert.equal(riskyRegex(re), 'a nested quantifier');
          assert.equal(reason(`$match(payload.s, /${re}/)`), `has a regular expression with a nested quantifier (/${re}/), which can take exponential time`);
        },
      ),
      { numRuns: runs(200) },
    );
  });

  it('a repeated group of alternatives is refused as a quantified alternation', () => {
    const word = fc.string({ unit: fc.constantFrom('a', 'b', 'c', '1', '-'), minLength: 1, maxLength: 4 });
    fc.assert(
      fc.property(fc.array(word, { minLength: 2, maxLength: 4 }), REPEAT, (alternatives, q) => {
        const re = `^(${alternatives.join('|')})${q}$`;
        assert.equal(riskyRegex(re), 'a quantified alternation');
        assert.match(reason(`$match(payload.s, /${re}/)`), /quantified alternation/);
      }),
      { numRuns: runs(200) },
    );
  });

  it('three quantified copies of one atom in a row are refused', () => {
    fc.assert(
      fc.property(
        ATOM,
        fc.array(
          REPEAT.filter((q) => q === '+' || q === '*'),
          { minLength: 3, maxLength: 3 },
        ),
        fc.constantFrom('', 'z', '$'),
        (atom, qs, tail) => {
          const re = `${atom}${qs[0]}${atom}${qs[1]}${atom}${qs[2]}${tail}`;
          assert.equal(riskyRegex(re), 'repeated quantifiers over the same characters');
          assert.match(reason(`$match(payload.s, /${re}/)`), /repeated quantifiers over the same characters/);
        },
      ),
      { numRuns: runs(100) },
    );
  });
});

describe('describe', () => {
  it('gives a JSONata error as one line with its position', () => {
    assert.equal(describeError({ message: 'Bad thing', position: 4 }), 'Bad thing (at character 4)');
    assert.equal(describeError({ code: 'T2001' }), 'error T2001');
    assert.equal(describeError('plain'), 'plain');
  });
});
