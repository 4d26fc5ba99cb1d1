/**
 * Executing a validated operation. Each distinct (document, operation) is compiled once by
 * graphql-jit into a plain function (no per-field interpretation of the AST on every
 * request) and kept on its document-cache entry, so it lives as long as the parsed text.
 * graphql-js's execute stays the reference: it runs when compiling fails, and whenever
 * the variables cannot be coerced, so that a request error reads word for word as it
 * always did (graphql-jit words those its own way; nothing has run by then).
 * test/graphql/executor.test.ts holds the two to the same answers, errors and nulls.
 */
import { execute, type DocumentNode, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';

/** What a document-cache entry carries for this module: its compiled operations. */
export interface CompiledHolder {
  document: DocumentNode;
  /** Per operation name ('' for the only one): the compiled query, or false when graphql-jit refused it. */
  compiled?: Map<string, CompiledQuery | false>;
}

function compiledFor(schema: GraphQLSchema, entry: CompiledHolder, operationName: string | undefined): CompiledQuery | undefined {
  entry.compiled ??= new Map();
  const key = operationName ?? '';
  let c = entry.compiled.get(key);
  if (c === undefined) {
    const made = compileQuery(schema, entry.document, operationName, { disablingCapturingStackErrors: true });
    c = isCompiledQuery(made) ? made : false;
    entry.compiled.set(key, c);
  }
  return c === false ? undefined : c;
}

export interface ExecuteArgs {
  schema: GraphQLSchema;
  entry: CompiledHolder;
  operationName: string | undefined;
  variableValues: Record<string, unknown>;
  contextValue: unknown;
}

/** graphql-js's execute, the reference the compiled path must match. */
export async function executeReference(a: ExecuteArgs): Promise<ExecutionResult> {
  return execute({
    schema: a.schema,
    document: a.entry.document,
    variableValues: a.variableValues,
    operationName: a.operationName,
    contextValue: a.contextValue,
  });
}

/** The compiled operation's result; the reference executor's where compiling or the variables fail. */
export async function executeCompiled(a: ExecuteArgs): Promise<ExecutionResult> {
  const compiled = compiledFor(a.schema, a.entry, a.operationName);
  if (compiled === undefined) return executeReference(a);
  const result = await compiled.query(undefined, a.contextValue, a.variableValues);
  // No data at all: a request error (the variables), raised before any resolver ran.
  if (!('data' in result) || result.data === undefined) return executeReference(a);
  return result;
}
