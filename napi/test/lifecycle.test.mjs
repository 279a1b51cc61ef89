// SPDX-License-Identifier: MIT
// Release, abort and environment teardown: every pending caller gets an error, nothing hangs or crashes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { addon, startBlockingWorker, nextMessage } from '../test-support/helpers.mjs';

const T = { timeout: 20_000 };
const concat = (a, b) => a + b;

test('abort with calls queued: every queued call and every later call fails with CLOSED', T, async () => {
  let ran = 0;
  const id = addon.createTarget((a, b) => { ran++; return a + b; });
  try {
    // The JS thread queues 50 calls, aborts, queues one more, and only then returns to its loop.
    const r = await addon.queueThen(id, 50, 'abort');
    assert.deepEqual({ ok: r.ok, closed: r.closed, other: r.jsErrors + r.conversionErrors + r.otherErrors },
                     { ok: 0, closed: 51, other: 0 });
    assert.equal(ran, 0);
    await assert.rejects(Promise.resolve().then(() => addon.callTargetSync(id, 'a', 'b', 0)), { code: 'XTHREAD_NAPI_CLOSED' });
  } finally {
    addon.dropTarget(id);
  }
});

test('release with calls queued: queued calls still run, later calls fail with CLOSED', T, async () => {
  let ran = 0;
  const id = addon.createTarget((a, b) => { ran++; return a + b; });
  try {
    const r = await addon.queueThen(id, 50, 'release');
    assert.deepEqual({ ok: r.ok, closed: r.closed }, { ok: 50, closed: 1 });
    assert.equal(ran, 50);
  } finally {
    addon.dropTarget(id);
  }
});

test('abort from inside the callee while a C++ thread keeps calling', T, async () => {
  let id = 0;
  let ran = 0;
  id = addon.createTarget((a, b, i) => {
    ran++;
    if (i === 5) addon.abortTarget(id); // the running call still returns its value
    return a + b;
  });
  try {
    const r = await addon.runCalls(id, { a: 'x', b: 'y', calls: 40, stopOnError: false });
    assert.equal(r.ok, 6);
    assert.equal(r.mismatches, 0);
    assert.equal(r.closed, 34);
    assert.equal(ran, 6);
    assert.match(r.firstError, /closed/);
  } finally {
    addon.dropTarget(id);
  }
});

test('call_sync on the JS thread itself runs inline (no deadlock)', T, () => {
  let depth = 0;
  const id = addon.createTarget((a, b) => { depth++; return a + b; });
  try {
    assert.equal(addon.callTargetSync(id, 'Hello', 'World', 0), 'HelloWorld');
    assert.equal(depth, 1); // ran before callTargetSync returned
  } finally {
    addon.dropTarget(id);
  }
});

test('nested: a C++ thread calls the main thread, whose JS calls itself synchronously (inline)', T, async () => {
  let inner = 0;
  const innerId = addon.createTarget((a, b) => { inner++; return `${a}+${b}`; });
  const outerId = addon.createTarget((a, b, i) => addon.callTargetSync(innerId, a, b, i));
  try {
    const r = await addon.runCalls(outerId, { a: 'p', b: 'q', calls: 3, returnLast: true, stopOnError: false });
    assert.equal(r.ok, 3);
    assert.equal(r.last, 'p+q');
    assert.equal(r.mismatches, 3); // the callee returns `${a}+${b}`, not a + b: the check itself works
    assert.equal(inner, 3);
  } finally {
    addon.dropTarget(outerId);
    addon.dropTarget(innerId);
  }
});

for (const mode of ['sync', 'async']) {
  test(`Worker terminated with calls in flight: the callers get CLOSED, the process lives on (${mode})`, T, async () => {
    const { worker, id } = await startBlockingWorker('block', 3);
    const busy = nextMessage(worker, (m) => m.busy !== undefined);
    // 'sync': one C++ thread calling back to back; 'async': all 20 calls queued at once.
    const run = addon.runCalls(id, { a: 'a', b: 'b', calls: 20, mode, stopOnError: false });
    await busy; // call 3 is running in the Worker (blocked), the rest are queued or not yet made
    const code = await worker.terminate();
    assert.equal(code, 1);
    const r = await run;
    assert.equal(r.ok, 3);
    assert.equal(r.mismatches, 0);
    assert.equal(r.closed, 17, `closed ${r.closed}, js ${r.jsErrors}, other ${r.otherErrors}: ${r.firstError}`);
    addon.dropTarget(id); // already forgotten by the Worker's cleanup; dropping again is harmless
    await assert.rejects(Promise.resolve().then(() => addon.callTargetSync(id, 'a', 'b', 0)), { code: 'XTHREAD_NAPI_ARG' });
  });
}

test('Worker calling process.exit() inside a call: the caller gets CLOSED', T, async () => {
  const { worker, id } = await startBlockingWorker('exit', 2);
  const exited = once(worker, 'exit');
  const r = await addon.runCalls(id, { a: 'a', b: 'b', calls: 10, stopOnError: false });
  const [code] = await exited;
  assert.equal(code, 7);
  assert.equal(r.ok, 2);
  assert.equal(r.closed, 8, `closed ${r.closed}, js ${r.jsErrors}, other ${r.otherErrors}: ${r.firstError}`);
});

test('a handle kept past its Worker: later calls fail with CLOSED, release is harmless', T, async () => {
  // The C++ side (runCalls) holds a copy of the handle while the Worker goes away; its calls then fail.
  const { worker, id } = await startBlockingWorker('block', 0);
  const busy = nextMessage(worker, (m) => m.busy !== undefined);
  const run = addon.runCalls(id, { a: 'a', b: 'b', calls: 5, stopOnError: false });
  await busy;
  await worker.terminate();
  const r = await run;
  assert.deepEqual({ ok: r.ok, closed: r.closed }, { ok: 0, closed: 5 });
});

test('many short-lived Workers with calls in flight do not leak into a crash', T, async () => {
  for (let k = 0; k < 8; k++) {
    const { worker, id } = await startBlockingWorker('block', k % 3);
    const busy = nextMessage(worker, (m) => m.busy !== undefined);
    const run = addon.runCalls(id, { a: 'a', b: 'b', calls: 6, mode: k % 2 ? 'async' : 'sync', stopOnError: false });
    await busy;
    await worker.terminate();
    const r = await run;
    assert.equal(r.ok + r.closed, 6);
  }
  // The main thread still works.
  const id = addon.createTarget(concat);
  try {
    const r = await addon.runCalls(id, { a: 'still', b: 'alive', calls: 3, returnLast: true });
    assert.equal(r.last, 'stillalive');
  } finally {
    addon.dropTarget(id);
  }
});

test('clocks: C++ steady_clock and process.hrtime.bigint() read the same CLOCK_MONOTONIC', T, () => {
  const before = process.hrtime.bigint();
  const cpp = addon.monotonicNowNs();
  const after = process.hrtime.bigint();
  assert.ok(before <= cpp && cpp <= after, `${before} <= ${cpp} <= ${after}`);
});

test('call order on the JS thread: call_sync runs inline, ahead of the calls this thread queued before it', T, async () => {
  // The documented rule (js_function.hpp, Ordering): calls from one non-JS thread run in the order made;
  // on the JS thread, call_sync() runs at once, before every queued call, and the call()s keep their order.
  const order = [];
  const id = addon.createTarget((a, b) => { order.push(b); return a + b; });
  try {
    const r = await addon.queueThen(id, 3, 'callSync');
    assert.deepEqual({ ok: r.ok, closed: r.closed }, { ok: 4, closed: 0 });
    assert.deepEqual(order, ['sync', '0', '1', '2', '3']);
  } finally {
    addon.dropTarget(id);
  }
});
