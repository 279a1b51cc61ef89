// SPDX-License-Identifier: MIT
// Summary statistics. Percentiles use the nearest-rank method on the sorted samples:
// p(q) = sorted[ceil(q * n) - 1].

const round3 = (x) => Math.round(x * 1000) / 1000;

// ns: array of numbers (nanoseconds). Returns microseconds, rounded to 1 ns.
export function summarizeUs(ns) {
  const n = ns.length;
  if (n === 0) return { mean: 0, p50: 0, p90: 0, p99: 0, min: 0, max: 0, count: 0 };
  const sorted = Float64Array.from(ns).sort();
  const rank = (q) => sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))];
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    mean: round3(sum / n / 1000),
    p50: round3(rank(0.5) / 1000),
    p90: round3(rank(0.9) / 1000),
    p99: round3(rank(0.99) / 1000),
    min: round3(sorted[0] / 1000),
    max: round3(sorted[n - 1] / 1000),
    count: n,
  };
}
