/**
 * The two GraphQL error codes (docs/graphql.md), carried in errors[].extensions.code with
 * HTTP 200. Auth, scope and rate errors are HTTP statuses instead and never come here.
 */
import { GraphQLError } from 'graphql';

export type GraphqlErrorCode = 'graphql_validation' | 'query_too_complex';

/** A bad argument, filter, slug or document: the caller must change the request. */
export function invalidArgument(message: string, argument?: string): GraphQLError {
  return new GraphQLError(message, { extensions: argument === undefined ? { code: 'graphql_validation' } : { code: 'graphql_validation', argument } });
}

export function tooComplex(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'query_too_complex' } });
}
