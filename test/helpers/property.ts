/**
 * How many cases a property test runs. `npm test` runs the counts written in the tests,
 * chosen to finish in seconds; a nightly run sets PROPERTY_SCALE (for example 10) to
 * multiply every count.
 */
const scale = Number(process.env.PROPERTY_SCALE ?? 1);
if (!(scale > 0)) throw new Error('PROPERTY_SCALE must be a positive number');

export function runs(base: number): number {
  return Math.max(1, Math.round(base * scale));
}
