/**
 * Cost limits of a GraphQL document, checked right after parsing and before the standard
 * validation rules, so a hostile document (thousands of aliases, deep introspection) is
 * refused in time linear in its size; some standard rules (overlapping fields) are
 * quadratic in the number of fields.
 *
 * Complexity: every selected field costs 1 plus what it selects. factQuery adds a fixed 10
 * (a database statement; 10 more with a join), and the fields under `results` count once
 * per 25 rows of `limit`. So one factQuery selecting every field with limit 250 costs 78
 * (88 with a join) and fits in 200; ten such fields cost 780. factAggregate costs the same
 * fixed 10 (10 more with a join, 10 more for a series), and the fields under `groups` count
 * once per 1,000 groups of its `limit`: one statement answers all its groups, which are small. Fragments are costed once
 * per (fragment, multiplier) and spreads reuse that, so nested spreads cannot blow up the
 * analysis itself.
 */
import {
  getNamedType,
  Lexer,
  Source,
  TokenKind,
  isObjectType,
  isInterfaceType,
  Kind,
  SchemaMetaFieldDef,
  TypeMetaFieldDef,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
import { DEFAULT_LIMIT, MAX_LIMIT } from './fact-query.ts';
import { DEFAULT_GROUPS, MAX_GROUPS } from '../facts/aggregate/plan.ts';

export const MAX_COMPLEXITY = 200;
export const MAX_DEPTH = 10;
export const MAX_TOKENS = 8000;
/** Brackets, braces and parentheses nested in the text; an honest query needs far fewer. */
export const MAX_NESTING = 32;

const FACT_QUERY_COST = 10;
const JOIN_COST = 10;
const ROWS_PER_COST_UNIT = 25;
const GROUPS_PER_COST_UNIT = 1000;
const SERIES_COST = 10;

/**
 * Scans the tokens (comments and whitespace are not tokens, as for parse's maxTokens)
 * before parsing: too many tokens, or nesting deep enough to exhaust the recursive
 * parser's stack, are refused here in one linear pass. Returns undefined when neither
 * limit is hit, including for text that does not lex: parse reports that.
 */
export function scanDocument(text: string): 'tokens' | 'nesting' | undefined {
  const lexer = new Lexer(new Source(text));
  let count = 0;
  let nesting = 0;
  try {
    for (let token = lexer.advance(); token.kind !== TokenKind.EOF; token = lexer.advance()) {
      if (++count > MAX_TOKENS) return 'tokens';
      if (token.kind === TokenKind.BRACE_L || token.kind === TokenKind.BRACKET_L || token.kind === TokenKind.PAREN_L) {
        if (++nesting > MAX_NESTING) return 'nesting';
      } else if (token.kind === TokenKind.BRACE_R || token.kind === TokenKind.BRACKET_R || token.kind === TokenKind.PAREN_R) nesting--;
    }
  } catch {
    return undefined;
  }
  return undefined;
}

export interface DocumentCost {
  complexity: number;
  depth: number;
}

interface Cost {
  cost: number;
  depth: number;
}

/**
 * The rows a factQuery (or groups a factAggregate) may return, from a literal, a variable or
 * the default; bounded so a bad limit is reported as such by the resolver, not as complexity.
 */
function limitOf(
  value: ValueNode | undefined,
  variables: Readonly<Record<string, unknown>>,
  defaults: ReadonlyMap<string, ValueNode>,
  bounds: { def: number; max: number } = { def: DEFAULT_LIMIT, max: MAX_LIMIT },
): number {
  let n: unknown = bounds.def;
  if (value?.kind === Kind.INT) n = Number(value.value);
  else if (value?.kind === Kind.VARIABLE) {
    const name = value.name.value;
    const given = Object.hasOwn(variables, name) ? variables[name] : undefined;
    const def = defaults.get(name);
    n = typeof given === 'number' ? given : def?.kind === Kind.INT ? Number(def.value) : bounds.def;
  }
  return typeof n === 'number' && Number.isFinite(n) ? Math.min(bounds.max, Math.max(1, Math.trunc(n))) : bounds.def;
}

export function documentCost(schema: GraphQLSchema, document: DocumentNode, variables: Readonly<Record<string, unknown>>): DocumentCost {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const memo = new Map<string, Cost>();
  const inProgress = new Set<string>();
  let varDefaults = new Map<string, ValueNode>();

  const selectionCost = (set: SelectionSetNode | undefined, parent: GraphQLNamedType | undefined, rowsFactor: number): Cost => {
    if (!set) return { cost: 0, depth: 0 };
    let cost = 0;
    let depth = 0;
    const fieldsOf = parent && (isObjectType(parent) || isInterfaceType(parent)) ? parent.getFields() : undefined;
    for (const sel of set.selections) {
      let c: Cost;
      if (sel.kind === Kind.FIELD) {
        const name = sel.name.value;
        let def = fieldsOf?.[name];
        if (!def && parent === schema.getQueryType()) def = name === '__schema' ? SchemaMetaFieldDef : name === '__type' ? TypeMetaFieldDef : undefined;
        const childType = def ? getNamedType(def.type) : undefined;
        let childFactor = 1;
        let own = 1;
        if (name === 'factQuery' && parent === schema.getQueryType()) {
          own += FACT_QUERY_COST;
          const join = sel.arguments?.find((a) => a.name.value === 'joinDataModelSlug');
          if (join && join.value.kind !== Kind.NULL) own += JOIN_COST;
          const limitArg = sel.arguments?.find((a) => a.name.value === 'limit');
          childFactor = Math.ceil(limitOf(limitArg?.value, variables, varDefaults) / ROWS_PER_COST_UNIT);
        }
        if (name === 'factAggregate' && parent === schema.getQueryType()) {
          own += FACT_QUERY_COST;
          const present = (arg: string) => {
            const a = sel.arguments?.find((x) => x.name.value === arg);
            return a !== undefined && a.value.kind !== Kind.NULL && !(a.value.kind === Kind.BOOLEAN && !a.value.value);
          };
          if (present('joinDataModelSlug')) own += JOIN_COST;
          if (present('series')) own += SERIES_COST;
          const limitArg = sel.arguments?.find((a) => a.name.value === 'limit');
          childFactor = Math.ceil(limitOf(limitArg?.value, variables, varDefaults, { def: DEFAULT_GROUPS, max: MAX_GROUPS }) / GROUPS_PER_COST_UNIT);
        }
        // The rows factor of the enclosing factQuery (or factAggregate) applies to what results (groups) selects.
        const resultsFactor = (name === 'results' && parent?.name === 'PageOfFact') || (name === 'groups' && parent?.name === 'FactAggregate') ? rowsFactor : 1;
        const child = selectionCost(sel.selectionSet, childType, childFactor);
        c = { cost: own + child.cost * resultsFactor, depth: 1 + child.depth };
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        const t = sel.typeCondition ? schema.getType(sel.typeCondition.name.value) : parent;
        c = selectionCost(sel.selectionSet, t ?? undefined, rowsFactor);
      } else {
        const name = sel.name.value;
        const key = `${name}|${rowsFactor}`;
        const known = memo.get(key);
        if (known) c = known;
        else if (inProgress.has(key) || !fragments.has(name))
          c = { cost: 0, depth: 0 }; // cycles and unknown fragments fail validation later
        else {
          inProgress.add(key);
          const frag = fragments.get(name)!;
          c = selectionCost(frag.selectionSet, schema.getType(frag.typeCondition.name.value) ?? undefined, rowsFactor);
          inProgress.delete(key);
          memo.set(key, c);
        }
      }
      cost += c.cost;
      depth = Math.max(depth, c.depth);
    }
    return { cost, depth };
  };

  let complexity = 0;
  let depth = 0;
  for (const d of document.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    varDefaults = new Map((d.variableDefinitions ?? []).flatMap((v) => (v.defaultValue ? [[v.variable.name.value, v.defaultValue] as const] : [])));
    // Memoized costs depend on the operation's variables (limit): start afresh per operation.
    memo.clear();
    const root = d.operation === 'query' ? schema.getQueryType() : undefined;
    const c = selectionCost(d.selectionSet, root ?? undefined, 1);
    // Summed: only one operation runs, but every operation of the document is validated.
    complexity += c.cost;
    depth = Math.max(depth, c.depth);
  }
  return { complexity, depth };
}

const PUBLIC_ROOT_FIELDS: ReadonlySet<string> = new Set(['health', '__typename']);

/** True when the operation selects nothing but health and __typename at its root: no token needed. */
export function isPublicOperation(operation: OperationDefinitionNode, document: DocumentNode): boolean {
  if (operation.operation !== 'query') return false;
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const seen = new Set<string>();
  const check = (set: SelectionSetNode): boolean =>
    set.selections.every((sel) => {
      if (sel.kind === Kind.FIELD) return PUBLIC_ROOT_FIELDS.has(sel.name.value);
      if (sel.kind === Kind.INLINE_FRAGMENT) return check(sel.selectionSet);
      if (seen.has(sel.name.value)) return true;
      seen.add(sel.name.value);
      const frag = fragments.get(sel.name.value);
      // An unknown fragment is a validation error; asking for a token first reveals nothing.
      return frag !== undefined && check(frag.selectionSet);
    });
  return check(operation.selectionSet);
}
