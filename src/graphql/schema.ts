/**
 * The executable schema, written as code so the scalars and resolvers are typed. It must
 * print exactly as schema.graphql at the repository root (the published schema): a test
 * compares the served schema, read back through introspection, with that file.
 */
import {
  GraphQLBoolean,
  GraphQLID,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  type GraphQLFieldConfigArgumentMap,
} from 'graphql';
import { DateTimeScalar, JsonScalar } from './scalars.ts';
import { factAggregateField } from './fact-aggregate.ts';
import { resolveFactQuery, type FactRow, type GraphqlContext } from './fact-query.ts';

export const SCHEMA_VERSION = '2026-07-05';

const FactType = new GraphQLObjectType<FactRow, GraphqlContext>({
  name: 'Fact',
  description: 'One stored observation of a business entity, conforming to a data model.',
  fields: {
    id: { type: new GraphQLNonNull(GraphQLID), description: 'Fact identifier.' },
    dataModelId: { type: new GraphQLNonNull(GraphQLID), description: 'The data model the fact conforms to.' },
    entityId: { type: GraphQLString, description: "Business entity identifier taken from the data model's primary-key field; scoped by data model." },
    observedAt: { type: new GraphQLNonNull(DateTimeScalar), description: 'When the underlying business event occurred.' },
    data: { type: new GraphQLNonNull(JsonScalar), description: "Harmonized business data matching the data model's field definitions." },
    insertedAt: { type: new GraphQLNonNull(DateTimeScalar), description: 'When the fact was stored.' },
  },
});

const PageOfFactType = new GraphQLObjectType({
  name: 'PageOfFact',
  description: 'One page of facts and where it sits among all matching facts.',
  fields: {
    hasNextPage: { type: new GraphQLNonNull(GraphQLBoolean) },
    hasPreviousPage: { type: new GraphQLNonNull(GraphQLBoolean) },
    pageNumber: { type: new GraphQLNonNull(GraphQLInt), description: 'Current page number.' },
    lastPage: { type: new GraphQLNonNull(GraphQLInt), description: 'Number of the last page.' },
    limit: { type: new GraphQLNonNull(GraphQLInt), description: 'Records per page.' },
    count: { type: GraphQLInt, description: 'Total count over all pages.' },
    results: { type: new GraphQLList(new GraphQLNonNull(FactType)), description: 'Records of the page.' },
  },
});

const factQueryArgs: GraphQLFieldConfigArgumentMap = {
  dataModelSlug: { type: new GraphQLNonNull(GraphQLString), description: "Slug of a data model of the caller's workspace." },
  mode: { type: GraphQLString, defaultValue: 'latest', description: 'latest: one current row per entity; timeline: the history.' },
  timeAxis: { type: GraphQLString, defaultValue: 'observed_at', description: 'observed_at or inserted_at: the axis of since, until and of "latest".' },
  since: {
    type: DateTimeScalar,
    description: 'Inclusive lower bound. Timeline default: 90 days before until. Latest: drops entities whose latest row is older.',
  },
  until: {
    type: DateTimeScalar,
    description: 'Timeline: exclusive upper bound, default now; spans are clamped to 366 days. Latest: as of this instant (inclusive).',
  },
  filters: { type: GraphQLString, description: 'JSON array of at most 20 {field, op, value} clauses, ANDed, on fields of the data model.' },
  sort: {
    type: GraphQLString,
    defaultValue: 'observed_at',
    description: 'Timeline: observed_at, inserted_at or entity_id; latest: observed_at only. Ties by id.',
  },
  sortDirection: { type: GraphQLString, defaultValue: 'desc', description: 'asc or desc.' },
  limit: { type: GraphQLInt, defaultValue: 50, description: 'Rows per page, 1 to 250.' },
  offset: { type: GraphQLInt, defaultValue: 0, description: 'Matching rows to skip.' },
  joinDataModelSlug: {
    type: GraphQLString,
    description: 'Latest mode only: a second data model matched on entityId; its fields appear in data under its slug.',
  },
  joinType: { type: GraphQLString, defaultValue: 'left', description: 'left keeps unmatched entities with null joined fields; inner leaves them out.' },
  joinFilters: { type: GraphQLString, description: 'Like filters, on the joined data model: only joined facts passing them can match.' },
};

const QueryType = new GraphQLObjectType<unknown, GraphqlContext>({
  name: 'Query',
  fields: {
    factQuery: {
      type: PageOfFactType,
      description: "Facts of one data model of the caller's workspace: the latest fact per entity, or the history in a time window.",
      args: factQueryArgs,
      resolve: (_root, args, context, info) => resolveFactQuery(args, context, info),
    },
    factAggregate: factAggregateField,
    health: { type: GraphQLString, description: 'Returns ok. The only field that needs no token.', resolve: () => 'ok' },
  },
});

export const schema = new GraphQLSchema({ query: QueryType });
