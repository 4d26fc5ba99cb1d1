/**
 * POST /api/graphql. The order of checks puts the cheap, token-free ones first so that a
 * hostile document costs little and an anonymous caller learns nothing it could not read
 * in schema.graphql:
 *
 *   envelope (400/415) -> parse with maxTokens -> depth and complexity (query_too_complex)
 *   -> token, rate window, scope, unless only health/__typename is selected (401/429/403)
 *   -> standard validation (graphql_validation) -> execute.
 *
 * Auth, scope and rate are done here rather than by the route-config hooks because one
 * field (health) is public while the others are not, and that depends on the document.
 */
import { isJsonMediaType, isObject } from '../json.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  getOperationAST,
  GraphQLError,
  Kind,
  type DocumentNode,
  type ExecutionResult,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
} from 'graphql';
import { epochSeconds, type Deps } from '../deps.ts';
import { AppError } from '../errors.ts';
import { principalFromAccount, verifyBearer, type Principal } from '../auth/principal.ts';
import { authorize as authorizeAccess } from '../auth/access.ts';
import { loadAccountWith } from '../auth/auth.sql.ts';
import { chargeAccountWindow } from '../http/rate-limit.ts';
import { logFailure, toAppError, type RenderError } from '../http/render-error.ts';
import type { SurfaceSpec } from '../http/surface.ts';
import { invalidArgument, tooComplex } from './errors.ts';
import { documentCost, isPublicOperation, MAX_COMPLEXITY, MAX_DEPTH, MAX_NESTING, MAX_TOKENS, scanDocument } from './limits.ts';
import { schema, SCHEMA_VERSION } from './schema.ts';
import { selectedFields, type DeferredCheck, type GraphqlContext, type PrefetchedModels } from './fact-query.ts';
import { createModelCache } from './model-cache.ts';
import { modelMap, modelsQuery } from '../facts/models.sql.ts';
import { SLUG_RE } from '../input.ts';
import { createDocumentCache } from './document-cache.ts';
import { executeCompiled } from './executor.ts';

export const GRAPHQL_PATH = '/api/graphql';
const VERSION_HEADER = 'x-graphql-schema-version';
const JSON_TYPE = 'application/json; charset=utf-8';

interface ErrorJson {
  message: string;
  locations?: readonly { line: number; column: number }[];
  path?: readonly (string | number)[];
  extensions: Record<string, unknown>;
}

function send(reply: FastifyReply, status: number, body: { data?: unknown; errors?: ErrorJson[] }): FastifyReply {
  return reply.code(status).header(VERSION_HEADER, SCHEMA_VERSION).header('cache-control', 'no-store').type(JSON_TYPE).send(JSON.stringify(body));
}

function errorJson(e: GraphQLError, fallbackCode: string): ErrorJson {
  const j = e.toJSON();
  return { ...j, extensions: { ...(j.extensions ?? {}), code: (j.extensions?.code as string | undefined) ?? fallbackCode } } as ErrorJson;
}

/** A request-level failure (validation, limits): 200 with errors and no data, as GraphQL over HTTP answers a request error (docs/graphql.md). */
function sendGraphqlErrors(reply: FastifyReply, errors: readonly GraphQLError[], fallbackCode = 'graphql_validation'): FastifyReply {
  return send(reply, 200, { errors: errors.map((e) => errorJson(e, fallbackCode)) });
}

/** The GraphQL surface's HTTP-level failures (400, 401, 403, 415, 429, 5xx) in the GraphQL error shape. */
const renderGraphqlError: RenderError = (e, _request, reply) => send(reply, e.status, { errors: [{ message: e.detail, extensions: { code: e.code } }] });

/** At most this many slugs are looked up with the account; the resolver loads any others itself. */
const MAX_PREFETCH_SLUGS = 20;

/**
 * The data model slugs the operation's factQuery and factAggregate fields name (as literals or variables), so
 * that they can be looked up in the account re-check's statement: one round trip instead of
 * two. The document is not validated yet; anything odd here just means no prefetch.
 */
function slugsOf(document: DocumentNode, operation: OperationDefinitionNode, variables: Record<string, unknown>): string[] {
  const fragments: Record<string, FragmentDefinitionNode> = {};
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments[d.name.value] = d;
  const slugs = new Set<string>();
  try {
    const selected = selectedFields([operation.selectionSet], { fragments, variableValues: variables });
    for (const node of [...(selected.get('factQuery') ?? []), ...(selected.get('factAggregate') ?? [])]) {
      for (const arg of node.arguments ?? []) {
        if (arg.name.value !== 'dataModelSlug' && arg.name.value !== 'joinDataModelSlug') continue;
        const v = arg.value.kind === Kind.STRING ? arg.value.value : arg.value.kind === Kind.VARIABLE ? variables[arg.value.name.value] : undefined;
        // A malformed slug names nothing; the resolver answers it without a lookup.
        if (typeof v === 'string' && SLUG_RE.test(v) && slugs.size < MAX_PREFETCH_SLUGS) slugs.add(v);
      }
    }
  } catch {
    return [];
  }
  return [...slugs];
}

async function authorize(
  deps: Deps,
  request: FastifyRequest,
  reply: FastifyReply,
  slugs: string[],
): Promise<{ principal: Principal; models: PrefetchedModels; fingerprint: string }> {
  const claims = verifyBearer(deps.signingKey, request.headers.authorization, epochSeconds(deps.clock));
  // The models are looked up in the workspace the token claims; principalFromAccount
  // refuses the request unless the account is still in that very workspace.
  const { account, rows } = await loadAccountWith(deps.db, claims.sub, { rows: modelsQuery(deps.db, claims.ws, slugs) });
  const row = rows[0];
  const principal = principalFromAccount(claims, account);
  // The same per-account window as JSON:API: one budget per service account across surfaces.
  await chargeAccountWindow(deps.limiter, deps.config.rateLimit, reply, principal.credentialId);
  authorizeAccess(principal, 'facts.query');
  return { principal, models: { slugs: new Set(slugs), models: modelMap(row?.models ?? []) }, fingerprint: row?.fingerprint ?? '' };
}

/** Resolver failures that are not the caller's fault are logged and answered without detail. */
function shapeExecutionResult(
  request: FastifyRequest,
  result: ExecutionResult,
): { status: number; retryAfter?: number; body: { data?: unknown; errors?: ErrorJson[] } } {
  let status = 200;
  let retryAfter: number | undefined;
  const errors = result.errors?.map((e) => {
    const original = e.originalError;
    if (original === undefined || original instanceof GraphQLError) return errorJson(e, 'graphql_validation');
    // An argument the fact query refused: the caller's to change, named as GraphQL names it.
    if (original instanceof AppError && original.code === 'invalid_query') {
      // Built from the error's locations and path, not its nodes: the compiled executor's
      // errors carry no nodes (executor.ts), and the JSON is the same as GraphQLError's.
      const argument = original.source?.parameter;
      return {
        message: original.detail,
        ...(e.locations ? { locations: e.locations } : {}),
        ...(e.path ? { path: e.path } : {}),
        extensions: argument === undefined ? { code: 'graphql_validation' } : { code: 'graphql_validation', argument },
      };
    }
    const app = toAppError(original);
    logFailure(request, app, original, 'factQuery failed');
    const unavailable = app.code === 'unavailable';
    status = Math.max(status, unavailable ? 503 : 500);
    if (unavailable) retryAfter = app.retryAfter;
    return {
      message: unavailable ? app.detail : 'An unexpected error occurred',
      ...(e.locations ? { locations: e.locations } : {}),
      ...(e.path ? { path: e.path } : {}),
      extensions: { code: unavailable ? 'unavailable' : 'internal_error' },
    };
  });
  const body: { data?: unknown; errors?: ErrorJson[] } = {};
  if (errors) body.errors = errors;
  if ('data' in result) body.data = result.data;
  return retryAfter === undefined ? { status, body } : { status, retryAfter, body };
}

type DocumentCache = ReturnType<typeof createDocumentCache>;

/** Depth, complexity, the operation to run and standard validation: the first that fails, as errors. */
function documentProblems(
  document: DocumentNode,
  operation: OperationDefinitionNode | null | undefined,
  operationName: unknown,
  vars: Record<string, unknown>,
  cached: ReturnType<DocumentCache['parse']>,
  documents: DocumentCache,
): readonly GraphQLError[] | undefined {
  // The cost covers every operation of the document, since all are validated.
  const cost = documentCost(schema, document, vars);
  if (cost.depth > MAX_DEPTH) return [tooComplex(`The query is ${cost.depth} levels deep; at most ${MAX_DEPTH} are allowed`)];
  if (cost.complexity > MAX_COMPLEXITY) {
    const shown = cost.complexity < 1e9 ? String(cost.complexity) : 'above a billion';
    return [tooComplex(`The query's complexity is ${shown}; at most ${MAX_COMPLEXITY} is allowed`)];
  }
  if (!operation) {
    const message = operationName
      ? 'operationName does not name an operation of the document'
      : 'The document must hold exactly one operation, or operationName must pick one';
    return [invalidArgument(message)];
  }
  const errors = documents.validate(cached);
  return errors.length > 0 ? errors : undefined;
}

/** The parsed document, or why it cannot be read: too many tokens, too deep, or a syntax error. */
function readDocument(documents: DocumentCache, query: string): { cached: ReturnType<DocumentCache['parse']> } | { error: GraphQLError } {
  const scan = scanDocument(query);
  if (scan === 'tokens') return { error: tooComplex(`The document has more than ${MAX_TOKENS} tokens`) };
  if (scan === 'nesting') return { error: tooComplex(`The document nests brackets more than ${MAX_NESTING} deep`) };
  try {
    // maxTokens again: the scan above is what answers, this is the parser's own guard.
    return { cached: documents.parse(query) };
  } catch (err) {
    if (err instanceof GraphQLError) return { error: err };
    // A stack overflow in the recursive parser: the scan should have stopped it first.
    if (err instanceof RangeError) return { error: tooComplex('The document is nested too deeply') };
    throw err;
  }
}

/**
 * The GraphQL surface. Its authenticator (authorize) runs inside the handler, not as a
 * hook: whether a token is needed depends on the document (health is public).
 */
export function graphqlSurface(deps: Deps): SurfaceSpec {
  return { render: renderGraphqlError, setup: (scope) => registerGraphqlRoute(scope, deps) };
}

function registerGraphqlRoute(app: FastifyInstance, deps: Deps): void {
  // Parsed text is many times its size in memory; honest clients send a few hundred short documents.
  const documents = createDocumentCache(schema, { maxEntries: 500, maxChars: 500_000, maxTokens: MAX_TOKENS });
  const models = createModelCache();

  app.post(GRAPHQL_PATH, async (request, reply) => {
    if (!isJsonMediaType(request.headers['content-type'], { suffixed: false })) {
      throw new AppError('unsupported_media_type', 'Content-Type must be application/json');
    }
    const body = request.body;
    // Not an object at all (including a batch array): the envelope itself is wrong.
    if (!isObject(body)) throw new AppError('bad_request', 'The request body must be a JSON object {query, variables, operationName}');
    const { query, variables, operationName } = body;
    if (typeof query !== 'string' || query.trim() === '')
      return sendGraphqlErrors(reply, [invalidArgument('query must be a string holding a GraphQL document')]);
    if (variables !== undefined && variables !== null && !isObject(variables))
      return sendGraphqlErrors(reply, [invalidArgument('variables must be a JSON object')]);
    if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') {
      return sendGraphqlErrors(reply, [invalidArgument('operationName must be a string')]);
    }
    const vars = (variables ?? {}) as Record<string, unknown>;

    // Without a valid token only health may be asked: a document that cannot
    // be read, or that asks for more, is authorized (401/403/429, and charged to the rate
    // window) before any other answer. A request with no token at all costs no statement.
    const read = readDocument(documents, query);
    if ('error' in read) {
      await authorize(deps, request, reply, []);
      return sendGraphqlErrors(reply, [read.error]);
    }
    const document = read.cached.document;

    const operation = getOperationAST(document, (operationName as string | null | undefined) ?? undefined);
    // With no operation picked, the document is public when all its operations are.
    const isPublic = operation
      ? isPublicOperation(operation, document)
      : document.definitions.every((d) => d.kind !== Kind.OPERATION_DEFINITION || isPublicOperation(d, document));
    // The document's own problems are answered after the token, rate window and scope (below).
    const problems = documentProblems(document, operation, operationName, vars, read.cached, documents);
    let auth: Awaited<ReturnType<typeof authorize>> | undefined;
    let deferred: DeferredCheck | undefined;
    if (!isPublic) {
      const slugs = operation && !problems ? slugsOf(document, operation, vars).sort() : [];
      const claims = verifyBearer(deps.signingKey, request.headers.authorization, epochSeconds(deps.clock));
      const remembered = problems ? undefined : models.get(claims.ws, slugs);
      if (remembered) {
        // The models are known: the resolver re-checks the account in its fact statement.
        await chargeAccountWindow(deps.limiter, deps.config.rateLimit, reply, claims.sub);
        deferred = { claims, remembered, cache: models, checked: false };
      } else {
        auth = await authorize(deps, request, reply, slugs);
        if (!problems) models.set({ workspaceId: claims.ws, slugs, prefetched: auth.models, fingerprint: auth.fingerprint });
      }
    }
    if (problems || !operation) return sendGraphqlErrors(reply, problems ?? []);

    const contextValue: GraphqlContext = {
      deps,
      principal: auth?.principal,
      models: auth?.models ?? deferred?.remembered.prefetched,
      now: new Date(deps.clock()),
      span: request.traceSpan,
      ...(deferred ? { deferred } : {}),
    };
    const result = await executeCompiled({ schema, entry: read.cached, variableValues: vars, operationName: operation.name?.value, contextValue });
    // An account refused in a resolver's own statement is refused as the route would have.
    const refused = result.errors?.map((e) => e.originalError).find((o) => o instanceof AppError && (o.status === 401 || o.status === 403));
    if (refused) throw refused;
    const shaped = shapeExecutionResult(request, result);
    if (shaped.retryAfter !== undefined) reply.header('retry-after', String(shaped.retryAfter));
    return send(reply, shaped.status, shaped.body);
  });

  // Only POST is served; answer the other methods here so they carry the schema version too.
  app.route({
    method: ['GET', 'PUT', 'PATCH', 'DELETE'],
    url: GRAPHQL_PATH,
    config: { refusesMethod: true },
    handler: async (_request, reply) => {
      reply.header('allow', 'POST');
      throw new AppError('method_not_allowed', 'Use POST with a JSON body {query, variables}');
    },
  });
}
