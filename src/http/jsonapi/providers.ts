/**
 * GET /api/json/v1/providers and /providers/{slug}: the bundled catalog, read-only. The
 * catalog is a handful of static entries, so the list is one page and takes no query.
 */
import type { FastifyInstance, FastifyRequest, RouteShorthandOptions } from 'fastify';
import { AppError } from '../../errors.ts';
import { API_PREFIX } from './document.ts';
import { sendDocument } from './routes.ts';
import { providers, findProvider, type Provider } from '../../providers/catalog.ts';
import { parseSpecText } from '../../openapi/parse.ts';

const PATH = `${API_PREFIX}/providers`;
const options: RouteShorthandOptions = { config: { permission: 'provider.read', rateLimit: 'account' } };

function noQuery(request: FastifyRequest): void {
  const names = Object.keys((request.query as Record<string, unknown> | undefined) ?? {});
  if (names.length > 0) throw new AppError('invalid_query', `providers take no query parameters (got ${names[0]})`, { source: { parameter: names[0]! } });
}

const summaries = new Map<string, { title: unknown; version: unknown; openapi_version: unknown }>();

function summary(p: Provider) {
  let s = summaries.get(p.slug);
  if (!s) {
    const doc = parseSpecText(p.spec.text, p.spec.format);
    const info = (doc.info ?? {}) as Record<string, unknown>;
    s = { title: info.title ?? null, version: info.version ?? null, openapi_version: doc.openapi ?? doc.swagger ?? null };
    summaries.set(p.slug, s);
  }
  return s;
}

function resource(p: Provider) {
  const s = summary(p);
  return {
    type: 'provider',
    id: p.slug,
    attributes: {
      name: p.name,
      description: p.description,
      connector_type: p.connector.type,
      auth_type: p.connector.auth_type,
      direction: p.connector.direction,
      config: p.connector.config,
      spec_format: p.spec.format,
      spec_title: s.title,
      spec_version: s.version,
      openapi_version: s.openapi_version,
    },
    links: { self: `${PATH}/${p.slug}` },
  };
}

export function providerRoutes(scope: FastifyInstance): void {
  scope.get(PATH, options, async (request, reply) => {
    noQuery(request);
    const list = providers();
    return sendDocument(reply, 200, { data: list.map(resource), links: { self: PATH }, meta: { count: list.length } });
  });
  scope.get(`${PATH}/:slug`, options, async (request, reply) => {
    noQuery(request);
    const p = findProvider((request.params as { slug: string }).slug);
    if (!p) throw new AppError('not_found', 'No provider with this id');
    return sendDocument(reply, 200, { data: resource(p), links: { self: `${PATH}/${p.slug}` } });
  });
}
