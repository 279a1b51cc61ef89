// SPDX-License-Identifier: MIT
// Runs the worker-callback example addon (build/Release/worker_callback.node) and checks its results.
// Exits non-zero on any failure, and after 60 s if something hangs. Run: node test.mjs
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

setTimeout(() => {
  console.error('test.mjs: timed out after 60 s');
  process.exit(1);
}, 60_000).unref();

const require = createRequire(import.meta.url);
const { sumTransformed } = require('./build/Release/worker_callback.node');

// A plain callback: the C++ thread calls it with call_sync() for 0..99 and sums the results, in order.
const seen = [];
assert.equal(await sumTransformed((i) => { seen.push(i); return i * i; }, 0, 100), 328350);
assert.deepEqual(seen, Array.from({ length: 100 }, (_, i) => i));

// An async callback: each returned Promise is awaited by the bridge; the JS thread keeps running meanwhile.
let ticks = 0;
const ticker = setInterval(() => ticks++, 1);
assert.equal(await sumTransformed(async (i) => { await sleep(2); return 2 * i; }, 1, 11), 110);
clearInterval(ticker);
assert.ok(ticks > 0, 'the JS thread ran timers while the C++ thread awaited the Promises');

// A throwing callback (sync or async): the thread catches JsError and the Promise rejects; the thread stops.
const calls = [];
await assert.rejects(sumTransformed((i) => { calls.push(i); if (i === 3) throw new TypeError('no 3'); return i; }, 0, 10),
                     { message: 'transform threw TypeError: no 3' });
assert.deepEqual(calls, [0, 1, 2, 3]);
await assert.rejects(sumTransformed(async () => { throw new RangeError('async no'); }, 0, 5),
                     { message: 'transform threw RangeError: async no' });
await assert.rejects(sumTransformed(() => 'not a number', 0, 1), /conversion: expected integer number or BigInt, got string/);

// Several jobs at once, each on its own thread.
const sums = await Promise.all([1, 2, 3, 4].map((k) => sumTransformed((i) => k * i, 0, 1000)));
assert.deepEqual(sums, [1, 2, 3, 4].map((k) => k * 499500));

// Bad arguments throw synchronously.
assert.throws(() => sumTransformed(42, 0, 1), { name: 'TypeError', message: /must be a function/ });
assert.throws(() => sumTransformed(() => 0, 'a', 1), { name: 'TypeError', message: /usage/ });

console.log('worker-callback example: ok');
// Every thread has ended and every JsFunction is released: the process exits by itself.
