/**
 * Parsed documents by their text, with their standard-validation errors once computed.
 * Clients send the same few query texts again and again with other variables; validating
 * one costs many times what parsing it does, a large share of a small factQuery. Validation depends only on the schema and the text, never on variables or on
 * the caller, so its result can be shared; the limits that depend on variables (limit
 * multiplies complexity) are still checked on every request.
 *
 * Bounded by entries and by the total length of the texts held, least recently used out.
 * A parsed document takes up to about 70 bytes of heap per character of its text (many
 * short fields, each with its location), so the length bound is what bounds the memory.
 */
import { parse, specifiedRules, validate, type DocumentNode, type GraphQLError, type GraphQLSchema } from 'graphql';
import type { CompiledHolder } from './executor.ts';

export interface CachedDocument extends CompiledHolder {
  document: DocumentNode;
  /** Set on first use; empty when the document is valid. */
  validationErrors?: readonly GraphQLError[];
}

export interface DocumentCache {
  /** The parsed document of `text`; parse errors are thrown (GraphQLError) and not cached. */
  parse(text: string): CachedDocument;
  validate(entry: CachedDocument): readonly GraphQLError[];
  readonly size: number;
}

export function createDocumentCache(schema: GraphQLSchema, opts: { maxEntries: number; maxChars: number; maxTokens: number }): DocumentCache {
  const entries = new Map<string, CachedDocument>();
  let chars = 0;
  return {
    parse(text) {
      const hit = entries.get(text);
      if (hit) {
        // Re-insert: a Map iterates in insertion order, so the first key is the least recently used.
        entries.delete(text);
        entries.set(text, hit);
        return hit;
      }
      const entry: CachedDocument = { document: parse(text, { maxTokens: opts.maxTokens }) };
      if (text.length <= opts.maxChars) {
        entries.set(text, entry);
        chars += text.length;
        for (const [key] of entries) {
          if (entries.size <= opts.maxEntries && chars <= opts.maxChars) break;
          entries.delete(key);
          chars -= key.length;
        }
      }
      return entry;
    },
    validate(entry) {
      entry.validationErrors ??= validate(schema, entry.document, specifiedRules, { maxErrors: 20 });
      return entry.validationErrors;
    },
    get size() {
      return entries.size;
    },
  };
}
