/**
 * The two custom scalars of the schema. DateTime is an ISO 8601 instant that always leaves
 * as UTC with a trailing Z; Json leaves as JSON text so that a client never has to know the
 * shape of a data model to select `data`.
 */
import { GraphQLError, GraphQLScalarType, Kind, type ValueNode } from 'graphql';
import { parseDateTime } from '../datetime.ts';

function serializeDateTime(value: unknown): string {
  if (value instanceof Date && !Number.isNaN(value.getTime())) return value.toISOString();
  if (typeof value === 'string') {
    const d = parseDateTime(value);
    if (d) return d.toISOString();
  }
  throw new GraphQLError('DateTime cannot represent this value');
}

/**
 * A DateTime input that is not one. The scalar cannot know which argument it is reading,
 * so it hands this on and the resolver refuses it naming the argument (`since`, `until`).
 */
export class UnreadableDateTime {
  readonly given: unknown;
  constructor(given: unknown) {
    this.given = given;
  }
}

export const DATETIME_EXPECTED = 'an ISO 8601 date-time with a zone, e.g. 2026-07-05T12:00:00Z or 2026-07-05T14:00:00+02:00';

function parseDateTimeInput(value: unknown): Date | UnreadableDateTime {
  return (typeof value === 'string' ? parseDateTime(value) : undefined) ?? new UnreadableDateTime(value);
}

export const DateTimeScalar = new GraphQLScalarType<Date | UnreadableDateTime, string>({
  name: 'DateTime',
  description: 'An ISO 8601 timestamp, always returned in UTC with a trailing Z. Input with an offset is converted to UTC.',
  serialize: serializeDateTime,
  parseValue: parseDateTimeInput,
  parseLiteral(ast: ValueNode) {
    return ast.kind === Kind.STRING ? parseDateTimeInput(ast.value) : new UnreadableDateTime(undefined);
  },
});

export const JsonScalar = new GraphQLScalarType<unknown, string>({
  name: 'Json',
  description: 'Arbitrary JSON carried as UTF-8 text: the value is a string holding a JSON document.',
  serialize(value: unknown): string {
    const text = JSON.stringify(value);
    if (text === undefined) throw new GraphQLError('Json cannot represent this value');
    return text;
  },
  parseValue(value: unknown): unknown {
    if (typeof value !== 'string') throw new GraphQLError('Json input must be a string holding JSON text');
    try {
      return JSON.parse(value);
    } catch {
      throw new GraphQLError('Json input is not valid JSON text');
    }
  },
  parseLiteral(ast: ValueNode): unknown {
    if (ast.kind !== Kind.STRING) throw new GraphQLError('Json input must be a string holding JSON text', { nodes: ast });
    try {
      return JSON.parse(ast.value);
    } catch {
      throw new GraphQLError('Json input is not valid JSON text', { nodes: ast });
    }
  },
});
