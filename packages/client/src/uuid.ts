/**
 * A random UUID (version 4) from crypto.getRandomValues. crypto.randomUUID would do, but a
 * browser offers it only in a secure context (https or localhost): a console served over
 * plain http on another host would have none.
 */
export function uuidV4(): string {
  const b = globalThis.crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40; // version 4
  b[8] = (b[8]! & 0x3f) | 0x80; // variant 10xx (RFC 9562)
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
