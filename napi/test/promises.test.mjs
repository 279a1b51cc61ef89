// SPDX-License-Identifier: MIT
// A JS function that returns a Promise (or thenable): the C++ caller gets its settled value, a rejection
// becomes JsError, the JS thread is never blocked while it is pending, and a Promise that never settles
// does not keep the caller once the function is aborted or its environment ends.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { addon, startBlockingWorker, nextMessage } from '../test-support/helpers.mjs';

const T = { timeout: 20_000 };
const echo = (type, fn, value, mode) => Promise.resolve().then(() => addon.echo(type, fn, value, mode));

for (const mode of ['sync', 'async']) {
  test(`a resolved Promise gives its converted value (${mode})`, T, async () => {
    assert.equal(await echo('string', async (v) => v + '!', 'x', mode), 'x!');
    assert.equal(await echo('double', (v) => new Promise((r) => setTimeout(() => r(v * 2), 5)), 21, mode), 42);
    assert.equal(await echo('int64', async () => 2n ** 60n, 1, mode), 2n ** 60n);
    // A thenable that is not a Promise, and one that calls back twice (the first settlement wins).
    assert.equal(await echo('string', () => ({ then(ok) { ok('thenable'); } }), 'x', mode), 'thenable');
    assert.equal(await echo('string', () => ({ then(ok, no) { ok('first'); no(new Error('late')); ok('x'); } }), 'x', mode), 'first');
  });

  test(`a rejection becomes JsError with its name and message (${mode})`, T, async () => {
    await assert.rejects(echo('string', async () => { throw new TypeError('nope'); }, 'x', mode),
                         { code: 'XTHREAD_NAPI_JS_ERROR', message: 'nope', jsName: 'TypeError' });
    // Non-Error rejection values are described like thrown values: String(value).
    await assert.rejects(echo('string', () => Promise.reject(42), 'x', mode), { code: 'XTHREAD_NAPI_JS_ERROR', message: '42' });
    await assert.rejects(echo('string', () => Promise.reject(null), 'x', mode), { code: 'XTHREAD_NAPI_JS_ERROR', message: 'null' });
    await assert.rejects(echo('string', () => Promise.reject({ message: 'plain object' }), 'x', mode),
                         { code: 'XTHREAD_NAPI_JS_ERROR', message: 'plain object' });
    // A then() that throws rejects the call the same way.
    await assert.rejects(echo('string', () => ({ then() { throw new RangeError('bad then'); } }), 'x', mode),
                         { code: 'XTHREAD_NAPI_JS_ERROR', message: 'bad then', jsName: 'RangeError' });
    // The settled value still goes through the conversion.
    await assert.rejects(echo('string', async () => 42, 'x', mode), { code: 'XTHREAD_NAPI_CONVERSION', message: /expected string, got number/ });
  });
}

test('call_sync on the JS thread cannot wait for a Promise: it fails at once with a clear error', T, async () => {
  let ran = 0;
  await assert.rejects(echo('string', async () => { ran++; return 'x'; }, 'x', 'inline'),
                       { code: 'XTHREAD_NAPI_ERROR', message: /cannot wait for the Promise/ });
  assert.equal(ran, 1);
});

test('the JS thread is not blocked while a call awaits, and the call waits for the settlement', T, async () => {
  let resolveIt;
  let turns = 0;
  const id = addon.createTarget((a, b) => new Promise((resolve) => { resolveIt = () => resolve(a + b); }));
  try {
    const run = addon.runCalls(id, { a: 'p', b: 'q', calls: 1, returnLast: true });
    while (!resolveIt) await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 20; i++) { turns++; await new Promise((r) => setImmediate(r)); }  // the loop keeps turning
    resolveIt();
    const r = await run;
    assert.deepEqual({ ok: r.ok, last: r.last, turns }, { ok: 1, last: 'pq', turns: 20 });
  } finally {
    addon.dropTarget(id);
  }
});

test('a thousand concurrent pending Promises each settle their own call', T, async () => {
  const pending = [];
  let all;
  const allArrived = new Promise((r) => { all = r; });
  const id = addon.createTarget((a, b, i) => new Promise((resolve) => {
    pending.push(() => resolve(a + b));
    if (pending.length === 1000) all();
  }));
  try {
    const run = addon.runCalls(id, { a: 'm', b: 'n', calls: 1000, mode: 'async' });
    await allArrived;
    for (const resolve of pending.reverse()) resolve();  // settled in the opposite order
    const r = await run;
    assert.deepEqual({ ok: r.ok, closed: r.closed, mismatches: r.mismatches }, { ok: 1000, closed: 0, mismatches: 0 });
  } finally {
    addon.dropTarget(id);
  }
});

test('a never-settling Promise: abort() gives the waiting caller CLOSED', T, async () => {
  let started;
  const startedP = new Promise((r) => { started = r; });
  const id = addon.createTarget(() => { started(); return new Promise(() => {}); });
  try {
    for (const mode of ['sync', 'async']) {
      const run = addon.runCalls(id, { a: 'a', b: 'b', calls: 1, mode, stopOnError: false });
      await startedP;
      addon.abortTarget(id);
      const r = await run;
      assert.deepEqual({ ok: r.ok, closed: r.closed }, { ok: 0, closed: 1 }, mode);
    }
  } finally {
    addon.dropTarget(id);
  }
});

test('a never-settling Promise in a Worker: the Worker\'s end gives the waiting caller CLOSED', T, async () => {
  const { worker, id } = await startBlockingWorker('pending', 0);
  const run = addon.runCalls(id, { a: 'a', b: 'b', calls: 1, stopOnError: false });
  await nextMessage(worker, (m) => m.busy !== undefined);
  await worker.terminate();
  const r = await run;
  // Seen once in CI (2026-11-30): ok 0, closed 0 — the call ended with another error: the termination
  // had landed between the callee's return and the bridge's then() call (pinned by the tests below). The
  // message names the category, to tell which race it is if it comes back.
  const counts = { ok: r.ok, closed: r.closed, jsErrors: r.jsErrors, conversionErrors: r.conversionErrors, otherErrors: r.otherErrors, firstError: r.firstError };
  assert.deepEqual({ ok: r.ok, closed: r.closed }, { ok: 0, closed: 1 }, JSON.stringify(counts));
});

// The CI failure above was a race: worker.terminate() landing after the callee's busy message but before
// the bridge had attached its callbacks to the returned Promise. Node then refuses the bridge's next
// Node-API calls (looking up `then`: a ConversionError, "expected string, got object"; creating the
// callbacks: a NapiError with napi_pending_exception). Each test below pins one point of that window: the
// Worker blocks in native code (which termination cannot interrupt) after the busy message, so the
// termination is already in force when the bridge goes on. The callee never settles, so the only right
// outcome is CLOSED.
for (const [mode, where] of [['pending-late', 'before the bridge looks up then'],
                             ['getter-late', 'inside a then getter that returns afterwards'],
                             ['getter-terminated', 'inside a then getter (its JS is terminated)']]) {
  test(`worker.terminate() ${where}: the waiting caller gets CLOSED`, T, async () => {
    for (const callMode of ['sync', 'async']) {
      const { worker, id } = await startBlockingWorker(mode, 0);
      const run = addon.runCalls(id, { a: 'a', b: 'b', calls: 1, mode: callMode, stopOnError: false });
      await nextMessage(worker, (m) => m.busy !== undefined);
      await worker.terminate();
      const r = await run;
      const counts = { ok: r.ok, closed: r.closed, jsErrors: r.jsErrors, conversionErrors: r.conversionErrors,
                       otherErrors: r.otherErrors, firstError: r.firstError };
      assert.deepEqual({ ok: r.ok, closed: r.closed }, { ok: 0, closed: 1 }, `${callMode}: ${JSON.stringify(counts)}`);
    }
  });
}

// The same race left to chance: Workers started, called and terminated at varied points. The callee
// returns a never-settling Promise at once ('pending') or after blocking in native code for 0 to 1 ms
// ('pending-late'), and the Worker is terminated on the busy message of the first or the second call, or
// a few event-loop turns after the calls were made (before or after the callee ran). Every call must end as
// ok (the callee had returned a value) or CLOSED, never as another category.
test('Worker start / call / terminate at varied points: every call ends ok or CLOSED', T, async () => {
  const rounds = 12;
  const lateMs = [0, 0.02, 0.1, 0.3, 1];
  const seen = {};
  for (let k = 0; k < rounds; k++) {
    const { worker, id } = await startBlockingWorker(k % 4 < 2 ? 'pending-late' : 'pending', k % 3 === 1 ? 1 : 0,
                                                     lateMs[k % lateMs.length]);
    const run = addon.runCalls(id, { a: 'a', b: 'b', calls: 2, mode: k % 2 ? 'async' : 'sync', stopOnError: false });
    if (k % 3 !== 2) await nextMessage(worker, (m) => m.busy !== undefined);
    else for (let t = 0; t < k % 5; t++) await new Promise((r) => setImmediate(r));
    await worker.terminate();
    const r = await run;
    const other = r.jsErrors + r.conversionErrors + r.otherErrors;
    if (other > 0) seen[r.firstError] = (seen[r.firstError] ?? 0) + 1;
    assert.equal(r.ok + r.closed + other, 2);
  }
  assert.deepEqual(seen, {}, `calls that ended with neither ok nor CLOSED, by first error, in ${rounds} rounds`);
});

test('Promises from a Worker: calls into a Worker whose function is async', T, async () => {
  const { worker, id } = await startBlockingWorker('async', -1);
  try {
    for (const mode of ['sync', 'async']) {
      const r = await addon.runCalls(id, { a: 'w', b: 'k', calls: 50, mode, returnLast: true });
      assert.deepEqual({ ok: r.ok, closed: r.closed, last: r.last }, { ok: 50, closed: 0, last: 'wk' }, mode);
    }
  } finally {
    await worker.terminate();
  }
});

test('await_promises = false: the Promise object itself is converted (and is not a string)', T, async () => {
  const id = addon.createTarget(async (a, b) => a + b, { awaitPromises: false });
  try {
    const r = await addon.runCalls(id, { a: 'a', b: 'b', calls: 3, stopOnError: false });
    assert.deepEqual({ ok: r.ok, conversion: r.conversionErrors }, { ok: 0, conversion: 3 });
    assert.match(r.firstError, /expected string, got object/);
  } finally {
    addon.dropTarget(id);
  }
});
