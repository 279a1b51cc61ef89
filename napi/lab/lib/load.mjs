// SPDX-License-Identifier: MIT
// Main-thread load of the ThreadSafeFunctionPerf study: every 8 ms, naive Fibonacci(n) plus a fresh
// random UUID (the study refreshed one in its UI), then a timed top-up (busy-wait) until the tick has
// lasted its target, 2 ms ("medium") or 7 ms ("heavy"). n is calibrated on this machine to take at most
// LOAD_FIB_SHARE of the target (see calibrate()); the top-up does the rest. The C++ lab
// (bench/lab/xcall/scenario.cpp, kLoadFibShare) builds xthread's load the same way, so both run the same load.
import { randomUUID } from 'node:crypto';

export const LOAD_PERIOD_MS = 8;
export const LOAD_TARGET_MS = { medium: 2, heavy: 7 };
export const LOAD_FIB_SHARE = 0.5;

export function fib(n) {
  return n <= 2 ? 1 : fib(n - 1) + fib(n - 2);
}

const nowNs = () => process.hrtime.bigint();

// Least time of `reps` runs: the estimate least disturbed by other processes on a shared machine.
function timeFibMs(n, reps) {
  let best = Infinity;
  for (let r = 0; r < reps; r++) {
    const t0 = nowNs();
    fib(n);
    best = Math.min(best, Number(nowNs() - t0) / 1e6);
  }
  return best;
}

// Returns { medium: { fib_n, fib_ms, target_ms }, heavy: {...} }: for each target, the largest n whose
// time is at most LOAD_FIB_SHARE x the target (one step of n multiplies the time by ~1.6, so fib alone
// cannot hit a target; the tick's timed top-up supplies the rest). Falls back to the smallest n measured.
export function calibrate(targets = LOAD_TARGET_MS) {
  for (let i = 0; i < 200; i++) fib(18); // let the JIT settle
  const maxTarget = Math.max(...Object.values(targets));
  const measured = [];
  for (let n = 12; n <= 40; n++) {
    const ms = timeFibMs(n, 7);
    measured.push({ n, ms });
    if (ms > maxTarget) break;
  }
  const out = {};
  for (const [name, target] of Object.entries(targets)) {
    let best = measured[0];
    for (const m of measured) if (m.ms <= target * LOAD_FIB_SHARE) best = m;
    out[name] = { fib_n: best.n, fib_ms: best.ms, target_ms: target };
  }
  return out;
}

// setInterval(…, 8) running fib(n) + randomUUID() + a busy-wait until the tick has lasted targetMs (0 = no
// top-up) on this (the main) thread; measures each tick.
export class MainLoad {
  constructor(fibN, targetMs = 0) {
    this.fibN = fibN;
    this.targetNs = BigInt(Math.round(targetMs * 1e6));
    this.timer = null;
    this.ticks = 0;
    this.busyNs = 0n;
    this.startNs = 0n;
    this.uuid = '';
  }
  start() {
    this.startNs = nowNs();
    this.timer = setInterval(() => {
      const t0 = nowNs();
      fib(this.fibN);
      this.uuid = randomUUID();
      const until = t0 + this.targetNs;
      while (nowNs() < until);
      this.busyNs += nowNs() - t0;
      this.ticks++;
    }, LOAD_PERIOD_MS);
  }
  // Stops and returns { ticks, load_ms (mean busy time of a tick), duty (busy / wall) }.
  stop() {
    clearInterval(this.timer);
    this.timer = null;
    const wallNs = Number(nowNs() - this.startNs);
    const busy = Number(this.busyNs);
    return {
      ticks: this.ticks,
      load_ms: this.ticks ? Math.round((busy / this.ticks / 1e6) * 1000) / 1000 : 0,
      duty: wallNs > 0 ? Math.round((busy / wallNs) * 10000) / 10000 : 0,
    };
  }
}
