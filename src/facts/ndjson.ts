/**
 * NDJSON lines out of a byte stream, each at most `maxBytes` long. node:readline holds a
 * line whole however long it is (a line of 512 MiB throws from inside the stream, where no
 * caller can catch it); here a longer line is dropped as it streams by and yielded as a
 * marker, so that one bad line costs one rejection, not the import.
 */

/** The longest import line read, as the JSON surfaces' default body limit: one fact of 1 MiB. */
export const MAX_LINE_BYTES = 1024 * 1024;

/** A line longer than the limit, skipped unread. */
export interface LongLine {
  tooLong: true;
}

export type NdjsonLine = string | LongLine;

const TOO_LONG: LongLine = Object.freeze({ tooLong: true });
const LF = 0x0a;
const CR = 0x0d;

/**
 * Splits on LF; a CR right before it belongs to the ending. A last line without an ending is
 * a line; an ending at the very end opens none. Lines split on a byte boundary that never
 * falls inside a UTF-8 sequence, so each line is decoded whole.
 */
export async function* ndjsonLines(input: AsyncIterable<Buffer | Uint8Array>, maxBytes = MAX_LINE_BYTES): AsyncGenerator<NdjsonLine> {
  let parts: Buffer[] = [];
  let size = 0;
  // The current line is known to be too long: its bytes are dropped as they come.
  let skipping = false;

  const take = (chunk: Buffer, start: number, end: number) => {
    if (end <= start || skipping) return;
    // The limit is on the line without its CR, which may be the last byte kept here.
    if (size + (end - start) > maxBytes + 1) {
      skipping = true;
      parts = [];
      size = 0;
      return;
    }
    parts.push(chunk.subarray(start, end));
    size += end - start;
  };

  const finish = (): NdjsonLine => {
    let line: NdjsonLine = TOO_LONG;
    if (!skipping) {
      let bytes = parts.length === 1 ? parts[0]! : Buffer.concat(parts, size);
      if (bytes.length > 0 && bytes[bytes.length - 1] === CR) bytes = bytes.subarray(0, bytes.length - 1);
      if (bytes.length <= maxBytes) line = bytes.toString('utf8');
    }
    parts = [];
    size = 0;
    skipping = false;
    return line;
  };

  for await (const piece of input) {
    const chunk = Buffer.isBuffer(piece) ? piece : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
    let start = 0;
    for (let at = chunk.indexOf(LF, start); at !== -1; at = chunk.indexOf(LF, start)) {
      take(chunk, start, at);
      start = at + 1;
      yield finish();
    }
    if (start < chunk.length) {
      // Copied: the stream may reuse its buffer once this chunk is handed back.
      take(Buffer.from(chunk.subarray(start)), 0, chunk.length - start);
    }
  }
  // Bytes after the last ending: a last line without one.
  if (size > 0 || skipping) yield finish();
}
