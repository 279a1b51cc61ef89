// SPDX-License-Identifier: MIT
// Test Worker (used by napi/test/lifecycle.test.mjs and promises.test.mjs): creates a target concat(a, b, i) -> a + b on this thread and posts { id }.
// On call number workerData.at it posts { busy: i } and then, by mode:
//   'block': waits in Atomics.wait forever (only worker.terminate() ends it);
//   'exit':  calls process.exit(7), tearing the Worker's environment down mid-call;
//   'pending': returns a Promise that never settles (only the Worker's end releases the caller);
//   'async': every call returns a Promise resolved with a + b on a later turn (no busy message).
// The late modes block in native code (addon.sleepMs(workerData.lateMs), which V8 cannot interrupt) right
// after the busy message, so a worker.terminate() made on that message lands in the bridge's next step:
//   'pending-late':     then returns a Promise that never settles, made before (the bridge's `then` lookup
//                       is refused);
//   'getter-late':      returns a thenable whose `then` getter posts busy and blocks, then gives a `then`
//                       that never calls back (the bridge's next Node-API calls are refused);
//   'getter-terminated': the same getter waits in Atomics.wait instead, where the termination lands.
import { parentPort, workerData } from 'node:worker_threads';
import { createRequire } from 'node:module';

const addon = createRequire(import.meta.url)(workerData.addonPath);
const never = new Int32Array(new SharedArrayBuffer(4));
let n = 0;
const { lateMs } = workerData;
const getter = (i, wait) => ({
  get then() {
    parentPort.postMessage({ busy: i });
    if (wait) Atomics.wait(never, 0, 0);
    else addon.sleepMs(lateMs);
    return () => {};
  },
});
const id = addon.createTarget((a, b, i) => {
  if (workerData.mode === 'async') return new Promise((resolve) => setImmediate(() => resolve(a + b)));
  if (n++ === workerData.at) {
    if (workerData.mode === 'getter-late') return getter(i, false);
    if (workerData.mode === 'getter-terminated') return getter(i, true);
    if (workerData.mode === 'pending-late') {
      const pending = new Promise(() => {});  // made first: no JS function starts after the sleep
      parentPort.postMessage({ busy: i });
      addon.sleepMs(lateMs);
      return pending;
    }
    parentPort.postMessage({ busy: i });
    if (workerData.mode === 'block') Atomics.wait(never, 0, 0);
    else if (workerData.mode === 'pending') return new Promise(() => {});
    else process.exit(7);
  }
  return a + b;
});
parentPort.postMessage({ id });
