#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// Node-API cross-thread call lab: a C++ thread calls JS through napi_threadsafe_function and waits for the
// returned string, through this project's bridge (xthread_napi::JsFunction::call_sync, --impl bridge,
// implementation "node-api") and/or through a bare TSFN with a C++ condition-variable wait (--impl raw,
// implementation "node-api-raw", the study's method). Reproduces the OpenHarmony
// ThreadSafeFunctionPerf study (shared/seeds, study 000). See docs/napi-bridge.md.
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { loadAddon } from './lib/addon.mjs';
import { calibrate, MainLoad, LOAD_PERIOD_MS, LOAD_TARGET_MS } from './lib/load.mjs';
import { makePayload } from './lib/payload.mjs';
import { summarizeUs } from './lib/stats.mjs';
import { XcallLab } from './lib/runner.mjs';

const USAGE = `usage: node napi/lab/xcall.mjs [options]
  --case LIST       cases to run: 1 (C++ -> main), 2 (C++ -> Worker), 3 (C++ -> Worker -> main sync); default 1,2,3
  --load LIST       main-thread load: idle, medium (fib + top-up to 2 ms every 8 ms), heavy (7 ms); default: see below
  --payload LIST    total chars, split in halves: 10 ('Hello'+'World'), 1000, 10k, 100k, 1M (k = 1e3, M = 1e6)
  --work LIST       extra busy time of the concatenating callee: 0, 100us, 2ms, 500ns (bare number = us); default 0
  --impl LIST       bridge (xthread_napi::JsFunction), raw (bare napi_threadsafe_function + C++ condition
                    variable); default bridge. Each point's calls run in 4 blocks, the implementations
                    interleaved (A B, B A, B A, A B), after 300 unrecorded calls per case and implementation
  --calls N         measured calls per point (default 500 idle, 300 under load)
  --warmup N        unmeasured calls before each point (default 10)
  --hot             back-to-back calls (default: random gap before each call, 0-200 us idle, 0-8 ms under load)
  --seed N          random seed of the gaps (default 1)
  --json FILE       also write the results as JSON (schema xthread-bench/xcall/1)
  --addon PATH      the xthread_napi.node to load (default: $XTHREAD_NAPI_ADDON, else build/*/napi/)
  -h, --help        this text
Default matrix (no --load and no --payload): cases x {idle, medium, heavy} at 10 chars, plus
cases x {10, 1000, 10k, 100k, 1M} idle. With --load and/or --payload: their cross product (missing
list = idle / 10).`;

const LOADS = ['idle', 'medium', 'heavy'];
const IMPLS = { bridge: 'node-api', raw: 'node-api-raw' }; // --impl name -> JSON implementation
const DEFAULT_PAYLOADS = [10, 1000, 10000, 100000, 1000000];
const DEFAULT_CALLS = { idle: 500, load: 300 };
const DEFAULT_WARMUP = 10;
// Before the first point of each case, every implementation makes this many unrecorded back-to-back calls,
// so V8 has compiled the callee and the Worker's forwarder before anything is measured. With only the
// per-point warm-up (10 calls), whichever implementation ran first at a case-3 point measured 1.3-2x
// slower (p50) than the one after it, in either order.
const JIT_WARMUP_CALLS = 300;
// Each point's calls are made in this many blocks, the implementations' order alternating A B, B A, B A,
// A B (fewer calls than blocks: fewer blocks, from the left),
// and the blocks' samples merged, so drift during a point (CPU frequency, the VM's scheduling mode) and
// going first or second weigh on every implementation alike.
const BLOCKS = 4;
const IDLE_GAP_NS = [0, 200_000];
const LOAD_GAP_NS = [0, 8_000_000];

class UsageError extends Error {}

function parseCount(text, what, min) {
  if (!/^\d+$/.test(text)) throw new UsageError(`${what} must be an integer, got "${text}"`);
  const n = Number(text);
  if (n < min || n > 10_000_000) throw new UsageError(`${what} must be between ${min} and 10000000, got ${text}`);
  return n;
}

function parseSize(text) {
  const m = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(text);
  if (!m) throw new UsageError(`bad payload "${text}" (examples: 10, 1000, 10k, 1M)`);
  const n = Number(m[1]) * ({ '': 1, k: 1e3, K: 1e3, m: 1e6, M: 1e6 })[m[2]];
  if (!Number.isInteger(n) || n < 2 || n > 64e6) throw new UsageError(`payload must be an integer from 2 to 64M chars, got "${text}"`);
  return n;
}

function parseDuration(text) {
  const m = /^(\d+(?:\.\d+)?)(ns|us|µs|ms|s)?$/.exec(text);
  if (!m) throw new UsageError(`bad work duration "${text}" (examples: 0, 100us, 2ms, 500ns)`);
  const ns = Number(m[1]) * ({ ns: 1, us: 1e3, 'µs': 1e3, ms: 1e6, s: 1e9 })[m[2] ?? 'us'];
  if (!Number.isFinite(ns) || ns > 10e9) throw new UsageError(`work duration too large: "${text}"`);
  return Math.round(ns);
}

function parseList(text, what, parseOne) {
  if (text === undefined || text === '') throw new UsageError(`${what} needs a value`);
  const items = text.split(',').map((s) => s.trim());
  if (items.some((s) => s === '')) throw new UsageError(`empty item in ${what} "${text}"`);
  return [...new Set(items.map(parseOne))];
}

export function parseArgs(argv) {
  const o = { cases: [1, 2, 3], impls: ['bridge'], loads: null, payloads: null, works: [0], calls: null, warmup: DEFAULT_WARMUP,
              hot: false, seed: 1, json: null, addon: null, help: false };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let value;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      value = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const next = () => {
      if (value !== undefined) return value;
      if (i + 1 >= argv.length || argv[i + 1].startsWith('--')) throw new UsageError(`${arg} needs a value`);
      return argv[++i];
    };
    switch (arg) {
      case '--case':
        o.cases = parseList(next(), '--case', (s) => {
          if (!['1', '2', '3'].includes(s)) throw new UsageError(`--case takes 1, 2, 3; got "${s}"`);
          return Number(s);
        }).sort();
        break;
      case '--load':
        o.loads = parseList(next(), '--load', (s) => {
          if (!LOADS.includes(s)) throw new UsageError(`--load takes idle, medium, heavy; got "${s}"`);
          return s;
        }).sort((x, y) => LOADS.indexOf(x) - LOADS.indexOf(y));
        break;
      case '--impl':
        o.impls = parseList(next(), '--impl', (s) => {
          if (!(s in IMPLS)) throw new UsageError(`--impl takes bridge, raw; got "${s}"`);
          return s;
        });
        break;
      case '--payload': o.payloads = parseList(next(), '--payload', parseSize); break;
      case '--work': o.works = parseList(next(), '--work', parseDuration); break;
      case '--calls': o.calls = parseCount(next(), '--calls', 1); break;
      case '--warmup': o.warmup = parseCount(next(), '--warmup', 0); break;
      case '--seed': o.seed = parseCount(next(), '--seed', 0); break;
      case '--json': o.json = next(); break;
      case '--addon': o.addon = next(); break;
      case '--hot':
        if (value !== undefined) throw new UsageError('--hot takes no value');
        o.hot = true;
        break;
      case '-h': case '--help': o.help = true; break;
      default: throw new UsageError(`unknown option "${argv[i]}" (see --help)`);
    }
  }
  return o;
}

// The list of points, grouped by load (in idle, medium, heavy order).
export function buildMatrix(o) {
  const points = [];
  const add = (kase, load, payload, work) => {
    if (!points.some((p) => p.kase === kase && p.load === load && p.payload === payload && p.work_ns === work)) {
      points.push({ kase, load, payload, work_ns: work });
    }
  };
  if (o.loads === null && o.payloads === null) {
    for (const load of LOADS) for (const kase of o.cases) for (const w of o.works) add(kase, load, 10, w);
    for (const kase of o.cases) for (const p of DEFAULT_PAYLOADS) for (const w of o.works) add(kase, 'idle', p, w);
  } else {
    for (const load of o.loads ?? ['idle']) {
      for (const kase of o.cases) for (const p of o.payloads ?? [10]) for (const w of o.works) add(kase, load, p, w);
    }
  }
  points.sort((x, y) => LOADS.indexOf(x.load) - LOADS.indexOf(y.load)); // stable: keeps order within a load
  return points;
}

// Same keys as the C++ lab's machine record (cpus, cpu_model, kernel, compiler, build_type, timestamp_utc),
// plus the Node.js side.
function machineInfo(addon, addonPath) {
  const cpus = os.cpus();
  const build = addon.buildInfo();
  return {
    cpus: cpus.length,
    cpu_model: cpus[0]?.model?.trim() ?? '',
    kernel: `${os.type()} ${os.release()} ${os.version()} ${os.machine()}`,
    compiler: build.compiler,
    build_type: build.build_type,
    timestamp_utc: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
    node: process.version,
    v8: process.versions.v8,
    napi_version: build.napi_version,
    addon: addonPath,
  };
}

const fmt = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const sizeName = (n) => (n === 10 ? '10' : n % 1e6 === 0 ? `${n / 1e6}M` : n % 1e3 === 0 ? `${n / 1e3}k` : String(n));
const workName = (ns) => (ns === 0 ? '0' : ns % 1e6 === 0 ? `${ns / 1e6}ms` : ns % 1e3 === 0 ? `${ns / 1e3}us` : `${ns}ns`);

function table(rows, header) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => cells.map((c, i) => String(c).padStart(widths[i])).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function report(results, loads, wallS, o) {
  const out = [];
  out.push(`Node-API cross-thread call (napi_threadsafe_function + blocking wait), microseconds; ` +
           `${o.hot ? 'hot (back-to-back)' : 'random gap before each call'}; wall ${wallS.toFixed(1)} s`);
  for (const l of loads) {
    out.push(`load ${l.load}: fib(${l.fib_n}) + randomUUID() + top-up to ${l.target_ms} ms every 8 ms, ${l.load_ms} ms per tick, duty ${(l.duty * 100).toFixed(1)}%`);
  }
  out.push('');
  const rows = results.map((p) => [
    p.implementation, p.case, p.load, sizeName(p.payload), workName(p.work_ns), p.calls,
    fmt(p.total_us.mean), fmt(p.total_us.p50), fmt(p.total_us.p90), fmt(p.total_us.p99), fmt(p.total_us.max),
    fmt(p.schedule_us.mean), fmt(p.execute_us.mean), fmt(p.notify_us.mean),
  ]);
  out.push(table(rows, ['impl', 'case', 'load', 'payload', 'work', 'calls', 'mean', 'p50', 'p90', 'p99', 'max',
                        'sched', 'exec', 'notify']));
  // The study's two summary tables (mean total), when the points exist.
  const pivot = (title, cols, pick, colName) => {
    const keys = [];
    for (const p of results) {
      if (!keys.some((k) => k.impl === p.implementation && k.c === p.case)) keys.push({ impl: p.implementation, c: p.case });
    }
    const body = [];
    for (const { impl, c } of keys) {
      const row = [`${impl} case ${c}`];
      let any = false;
      for (const col of cols) {
        const p = results.find((r) => r.implementation === impl && r.case === c && pick(r, col));
        row.push(p ? fmt(p.total_us.mean) : '-');
        any ||= Boolean(p);
      }
      if (any) body.push(row);
    }
    if (body.length && cols.length > 1) {
      out.push('', title);
      out.push(table(body, ['', ...cols.map(colName)]));
    }
  };
  const work0 = results.some((r) => r.work_ns === 0) ? 0 : results[0]?.work_ns;
  pivot('mean total by load (payload 10)', LOADS.filter((l) => results.some((r) => r.load === l && r.payload === 10)),
        (r, l) => r.load === l && r.payload === 10 && r.work_ns === work0, (l) => l);
  pivot('mean total by payload (idle)', [...new Set(results.filter((r) => r.load === 'idle').map((r) => r.payload))],
        (r, p) => r.load === 'idle' && r.payload === p && r.work_ns === work0, sizeName);
  return out.join('\n');
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`xcall: error: ${e.message}\n`);
      process.exitCode = 2;
      return;
    }
    throw e;
  }
  if (o.help) {
    process.stdout.write(USAGE + '\n');
    return;
  }
  let loaded;
  try {
    loaded = loadAddon(o.addon);
  } catch (e) {
    process.stderr.write(`xcall: error: ${e.message.split('\n')[0]}\n`);
    process.exitCode = 1;
    return;
  }
  const points = buildMatrix(o);
  const callsFor = (load) => o.calls ?? (load === 'idle' ? DEFAULT_CALLS.idle : DEFAULT_CALLS.load);
  const maxCalls = Math.max(JIT_WARMUP_CALLS, Math.max(...points.map((p) => callsFor(p.load))) + o.warmup);
  const started = process.hrtime.bigint();

  const needLoad = points.some((p) => p.load !== 'idle');
  const calibration = needLoad ? calibrate(LOAD_TARGET_MS) : null;

  const lab = new XcallLab({ addon: loaded.addon, addonPath: loaded.path, maxCalls });
  const results = [];
  const loads = [];
  const warmedUp = new Set();  // "case/impl" pairs that made their JIT warm-up calls
  try {
    for (const load of LOADS) {
      const group = points.filter((p) => p.load === load);
      if (group.length === 0) continue;
      let mainLoad = null;
      if (load !== 'idle') {
        mainLoad = new MainLoad(calibration[load].fib_n, calibration[load].target_ms);
        mainLoad.start();
      }
      try {
        for (const [k, p] of group.entries()) {
          const { a, b } = makePayload(p.payload);
          const calls = callsFor(load);
          const gap = o.hot ? [0, 0] : load === 'idle' ? IDLE_GAP_NS : LOAD_GAP_NS;
          for (const impl of o.impls) {
            if (warmedUp.has(`${p.kase}/${impl}`)) continue;
            warmedUp.add(`${p.kase}/${impl}`);
            await lab.runPoint({ kase: p.kase, impl, a, b, workNs: p.work_ns, calls: 0, warmup: JIT_WARMUP_CALLS });
          }
          const merged = Object.fromEntries(o.impls.map((impl) => [impl, { samples: null, cpuUs: 0, madeCalls: 0 }]));
          const blocks = Math.min(BLOCKS, calls);
          for (let block = 0; block < blocks; block++) {
            const blockCalls = Math.floor(calls / blocks) + (block < calls % blocks ? 1 : 0);
            const order = block % 4 === 1 || block % 4 === 2 ? [...o.impls].reverse() : o.impls;
            // Same seed for every implementation within a block: same gaps, same load phase.
            const seed = o.seed + 1000 * LOADS.indexOf(load) + k + 100_000 * block;
            for (const impl of order) {
              const r = await lab.runPoint({ kase: p.kase, impl, a, b, workNs: p.work_ns, calls: blockCalls,
                                             warmup: o.warmup, gapMinNs: gap[0], gapMaxNs: gap[1], seed });
              const m = merged[impl];
              m.samples = m.samples === null ? r.samples
                : Object.fromEntries(Object.entries(m.samples).map(([key, v]) => [key, v.concat(r.samples[key])]));
              m.cpuUs += r.cpuUsPerCall * (blockCalls + o.warmup);
              m.madeCalls += blockCalls + o.warmup;
            }
          }
          for (const impl of o.impls) {
            const { samples: s, cpuUs, madeCalls } = merged[impl];
            results.push({
              implementation: IMPLS[impl], case: p.kase, load, payload: p.payload, work_ns: p.work_ns, hot: o.hot, calls,
              total_us: summarizeUs(s.total_ns), schedule_us: summarizeUs(s.schedule_ns),
              execute_us: summarizeUs(s.execute_ns), notify_us: summarizeUs(s.notify_ns),
              // Process CPU (every thread) per call made, warm-up calls included.
              cpu_us_per_call: cpuUs / madeCalls,
              // Not measured by this lab; present (null) because the C++ lab's reader expects the keys.
              ratio_to_futex_floor: null, model_us: null,
              samples: s,
            });
          }
        }
      } finally {
        if (mainLoad) {
          const st = mainLoad.stop();
          loads.push({ load, fib_n: calibration[load].fib_n, load_ms: st.load_ms, duty: st.duty,
                       target_ms: calibration[load].target_ms, period_ms: LOAD_PERIOD_MS, runs: st.ticks });
        }
      }
    }
  } finally {
    await lab.close();
  }
  const wallS = Number(process.hrtime.bigint() - started) / 1e9;
  process.stdout.write(report(results, loads, wallS, o) + '\n');
  if (o.json) {
    const doc = { schema: 'xthread-bench/xcall/1', implementation: o.impls.map((i) => IMPLS[i]).join(','), machine: machineInfo(loaded.addon, loaded.path),
                  loads, points: results };
    writeFileSync(o.json, JSON.stringify(doc) + '\n');
    process.stdout.write(`wrote ${o.json}\n`);
  }
}

main().catch((e) => {
  process.stderr.write(`xcall: error: ${e?.message ?? e}\n`);
  process.exitCode = 1;
});
