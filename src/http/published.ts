/**
 * The published descriptions of the API: the OpenAPI document and the GraphQL SDL. Public,
 * like /healthz: they are the same for every caller and hold nothing of a workspace, and a
 * code generator reads them without a token.
 */
import type { FastifyInstance } from 'fastify';
import { printSchema } from 'graphql';
import type { Deps } from '../deps.ts';
import { renderPlainError } from './render-error.ts';
import type { SurfaceSpec } from './surface.ts';
import { GRAPHQL_SDL_PATH, OPENAPI_PATH, openApiText } from './jsonapi/openapi.ts';
import { schema } from '../graphql/schema.ts';

let sdl: string | undefined;

export function publishedSurface(deps: Deps): SurfaceSpec {
  return {
    render: renderPlainError,
    setup(scope: FastifyInstance) {
      scope.get(OPENAPI_PATH, async (_request, reply) => reply.type('application/json').send(openApiText({ apiSpecMaxBytes: deps.config.apiSpecMaxBytes })));
      scope.get(GRAPHQL_SDL_PATH, async (_request, reply) => {
        sdl ??= `${printSchema(schema)}\n`;
        return reply.type('text/plain; charset=utf-8').send(sdl);
      });
    },
  };
}
