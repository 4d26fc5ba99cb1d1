/**
 * An RFC 4180 reader for the tests, written apart from the writer (src/cli/csv.ts) so that a
 * round trip checks one against the other: records end in CRLF; a quoted field may hold
 * commas, CR, LF and doubled quotes. An unquoted empty field reads as null (missing), a
 * quoted one ("") as the empty string.
 */
export function parseCsv(text: string): Array<Array<string | null>> {
  const records: Array<Array<string | null>> = [];
  let record: Array<string | null> = [];
  let i = 0;
  while (i < text.length) {
    let value: string | null;
    if (text[i] === '"') {
      let v = '';
      i++;
      for (;;) {
        if (i >= text.length) throw new Error('unterminated quoted field');
        if (text[i] === '"') {
          if (text[i + 1] === '"') {
            v += '"';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        v += text[i];
        i++;
      }
      value = v;
    } else {
      let j = i;
      while (j < text.length && text[j] !== ',' && text[j] !== '\r') {
        if (text[j] === '"' || text[j] === '\n') throw new Error(`a bare ${JSON.stringify(text[j])} at ${j}`);
        j++;
      }
      value = j === i ? null : text.slice(i, j);
      i = j;
    }
    record.push(value);
    if (text[i] === ',') {
      i++;
    } else if (text.startsWith('\r\n', i)) {
      records.push(record);
      record = [];
      i += 2;
    } else {
      throw new Error(`expected , or CRLF at ${i}`);
    }
  }
  if (record.length > 0) throw new Error('the last record has no CRLF');
  return records;
}
