/**
 * Form-encoded deliveries (docs/webhooks.md, Form posts): what a trigger with `accept: form`
 * makes of an application/x-www-form-urlencoded body, once its signature was checked over
 * the raw bytes. A form with a `payload` field (GitHub's form content type, Slack's
 * interactivity) is that field's JSON; any other form (Slack's slash commands) is its fields.
 */
import { AppError } from '../errors.ts';
import { parseJson, unstorableTextAt } from '../json.ts';

export const FORM_MEDIA_TYPE = 'application/x-www-form-urlencoded';

/**
 * `&`-separated parts a form may have. Counted before decoding, so a body of a million
 * empty fields costs one scan, not a million strings; Slack's slash commands send about 12.
 */
export const MAX_FORM_FIELDS = 1000;

/** A field sent once is its value; a name sent again is every value, in order. */
export type FormFields = Record<string, string | string[]>;

export function isFormMediaType(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.split(';')[0]!.trim().toLowerCase() === FORM_MEDIA_TYPE;
}

const failed = (detail: string) => new AppError('invalid_request', detail);

/**
 * The fields of a form body's text, in the order they came. `__proto__` and `constructor`
 * are left out, as parseJson leaves them out of JSON bodies: a payload never holds a name
 * that could reach a prototype, whichever content type brought it.
 */
export function decodeForm(text: string): FormFields {
  let parts = 1;
  for (let i = text.indexOf('&'); i !== -1; i = text.indexOf('&', i + 1)) {
    if (++parts > MAX_FORM_FIELDS) throw failed(`The form has more than ${MAX_FORM_FIELDS} fields`);
  }
  const out: FormFields = Object.create(null);
  // URLSearchParams drops one leading "?" (a URL's query); in a body it belongs to the first name.
  for (const [name, value] of new URLSearchParams(text.startsWith('?') ? `&${text}` : text)) {
    if (name === '__proto__' || name === 'constructor') continue;
    const prev = out[name];
    if (prev === undefined) out[name] = value;
    else if (Array.isArray(prev)) prev.push(value);
    else out[name] = [prev, value];
  }
  return out;
}

/** The run's payload of a form body's text: the `payload` field's JSON when there is one, else the fields. */
export function formPayload(text: string): unknown {
  const fields = decodeForm(text);
  const payload = fields.payload;
  if (payload === undefined) {
    const at = unstorableTextAt(fields);
    if (at !== undefined) throw failed(`A form field holds \\u0000, which the database cannot store (at ${at})`);
    return fields;
  }
  if (Array.isArray(payload)) throw failed(`The form field payload is sent ${payload.length} times; send it once`);
  try {
    return parseJson(payload);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    const at = err.source?.pointer;
    const what = err.code === 'bad_request' ? 'is not valid JSON' : `holds JSON the service refuses: ${err.detail}`;
    throw failed(`The form field payload ${what}${at === undefined ? '' : ` (at ${at === '' ? 'the document root' : at})`}`);
  }
}
