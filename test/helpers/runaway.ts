/**
 * Tests never measure speed (that is bench/): a busy CI machine makes any tight bound flaky.
 * Where a test guards against a blow-up (backtracking, quadratic parsing, expansion without
 * end), it asserts the work done where it can see it, and otherwise this bound: at least ten
 * times what the work takes on a loaded machine (under 1 s), while the blow-ups it guards
 * against take minutes.
 */
export const RUNAWAY_MS = 10_000;
