// SPDX-License-Identifier: MIT
// The lab's three cases with tiny counts, and its command line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { addon, addonPath } from '../test-support/helpers.mjs';
import { XcallLab } from '../lab/lib/runner.mjs';
import { makePayload } from '../lab/lib/payload.mjs';
import { summarizeUs } from '../lab/lib/stats.mjs';

const XCALL = fileURLToPath(new URL('../lab/xcall.mjs', import.meta.url));
const T = { timeout: 60_000 };

test('cases 1, 2, 3 return the right strings and consistent phases', T, async () => {
  const lab = new XcallLab({ addon, addonPath, maxCalls: 12 });
  try {
    for (const kase of [1, 2, 3]) {
      for (const total of [10, 1000, 100_001]) {
        const { a, b } = makePayload(total);
        assert.equal(a.length + b.length, total);
        // runPoint throws unless every call returned exactly a + b and every callee recorded its stamps.
        const { samples: s, cpuUsPerCall } = await lab.runPoint({ kase, a, b, calls: 5, warmup: 2, gapMaxNs: 50_000 });
        assert.ok(cpuUsPerCall > 0 && Number.isFinite(cpuUsPerCall), `cpu per call ${cpuUsPerCall}`);
        assert.equal(s.total_ns.length, 5);
        for (let i = 0; i < 5; i++) {
          assert.equal(s.schedule_ns[i] + s.execute_ns[i] + s.notify_ns[i], s.total_ns[i]);
          assert.ok(s.schedule_ns[i] >= 0 && s.execute_ns[i] >= 0 && s.notify_ns[i] >= 0);
        }
      }
      const { samples: work } = await lab.runPoint({ kase, a: 'Hello', b: 'World', calls: 3, workNs: 300_000 });
      assert.ok(work.execute_ns.every((ns) => ns >= 300_000), `case ${kase} work ${work.execute_ns}`);
    }
  } finally {
    await lab.close();
  }
});

test('the payloads of the study', T, () => {
  assert.deepEqual(makePayload(10), { a: 'Hello', b: 'World' });
  for (const n of [1000, 10_000, 1_000_000]) {
    const { a, b } = makePayload(n);
    assert.equal(a.length, n / 2);
    assert.equal(b.length, n / 2);
    assert.notEqual(a, b);
    assert.match(a, /^[A-Za-z0-9]+$/);
  }
});

test('stats: nearest-rank percentiles in microseconds', T, () => {
  const s = summarizeUs([1000, 2000, 3000, 4000, 100_000]);
  assert.deepEqual(s, { mean: 22, p50: 3, p90: 100, p99: 100, min: 1, max: 100, count: 5 });
});

function xcall(args) {
  return spawnSync(process.execPath, [XCALL, ...args], {
    encoding: 'utf8', timeout: 50_000, env: { ...process.env, XTHREAD_NAPI_ADDON: addonPath },
  });
}

test('xcall: bad input is one stderr line and exit 2', T, () => {
  for (const args of [['--case', '4'], ['--load', 'busy'], ['--payload', '10q'], ['--calls', '0'], ['--calls'],
                      ['--work', '-1'], ['--frobnicate'], ['--hot=yes'], ['--payload', '1,,2']]) {
    const r = xcall(args);
    assert.equal(r.status, 2, `${args.join(' ')}: status ${r.status} stderr ${r.stderr}`);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^xcall: error: [^\n]+\n$/, args.join(' '));
  }
  const help = xcall(['--help']);
  assert.equal(help.status, 0);
  assert.match(help.stdout, /usage: node napi\/lab\/xcall\.mjs/);
});

test('xcall: a tiny run prints a table and writes the JSON schema', T, () => {
  const dir = mkdtempSync(join(tmpdir(), 'xcall-'));
  try {
    const file = join(dir, 'out.json');
    const r = xcall(['--case', '1,2,3', '--load', 'idle', '--payload', '10,1k', '--calls', '4', '--warmup', '1',
                     '--hot', '--json', file]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /case\s+load\s+payload/);
    const doc = JSON.parse(readFileSync(file, 'utf8'));
    assert.equal(doc.schema, 'xthread-bench/xcall/1');
    assert.equal(doc.implementation, 'node-api');
    for (const k of ['cpus', 'cpu_model', 'kernel', 'compiler', 'build_type', 'timestamp_utc', 'node']) {
      assert.ok(k in doc.machine, `machine.${k}`);
    }
    assert.equal(typeof doc.machine.cpus, 'number');
    assert.deepEqual(doc.loads, []);
    assert.equal(doc.points.length, 6);
    for (const p of doc.points) {
      assert.deepEqual(Object.keys(p), ['implementation', 'case', 'load', 'payload', 'work_ns', 'hot', 'calls', 'total_us',
                                        'schedule_us', 'execute_us', 'notify_us', 'cpu_us_per_call', 'ratio_to_futex_floor',
                                        'model_us', 'samples']);
      assert.ok(p.cpu_us_per_call > 0, `cpu_us_per_call ${p.cpu_us_per_call}`);
      assert.equal(p.ratio_to_futex_floor, null);
      assert.equal(p.model_us, null);
      assert.equal(p.implementation, 'node-api');
      assert.equal(p.calls, 4);
      assert.equal(p.hot, true);
      for (const k of ['total_us', 'schedule_us', 'execute_us', 'notify_us']) {
        assert.deepEqual(Object.keys(p[k]), ['mean', 'p50', 'p90', 'p99', 'min', 'max', 'count']);
        assert.equal(p[k].count, 4);
      }
      assert.deepEqual(Object.keys(p.samples), ['total_ns', 'schedule_ns', 'execute_ns', 'notify_ns']);
      assert.ok(p.samples.total_ns.every((x) => Number.isInteger(x) && x > 0));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('xcall: a loaded point records its load', T, () => {
  const dir = mkdtempSync(join(tmpdir(), 'xcall-'));
  try {
    const file = join(dir, 'out.json');
    const r = xcall(['--case', '1', '--load', 'medium', '--calls', '10', '--warmup', '0', '--json', file]);
    assert.equal(r.status, 0, r.stderr);
    const doc = JSON.parse(readFileSync(file, 'utf8'));
    assert.equal(doc.loads.length, 1);
    assert.equal(doc.loads[0].load, 'medium');
    assert.ok(doc.loads[0].fib_n > 10);
    assert.equal(doc.loads[0].target_ms, 2);
    assert.ok(Number.isInteger(doc.loads[0].runs));
    if (doc.loads[0].runs > 0) { // ticks ran while the point ran (nearly always: ~40 ms of random gaps)
      assert.ok(doc.loads[0].load_ms > 0 && doc.loads[0].duty > 0 && doc.loads[0].duty < 1, JSON.stringify(doc.loads));
    }
    assert.equal(doc.points[0].hot, false);
    assert.equal(doc.points[0].load, 'medium');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
