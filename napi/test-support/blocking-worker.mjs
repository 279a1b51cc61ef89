// Test Worker (used by napi/test/lifecycle.test.mjs): creates a target concat(a, b, i) -> a + b on this thread and posts { id }.
// On call number workerData.at it posts { busy: i } and then, by mode:
//   'block': waits in Atomics.wait forever (only worker.terminate() ends it);
//   'exit':  calls process.exit(7), tearing the Worker's environment down mid-call;
//   'pending': returns a Promise that never settles (only the Worker's end releases the caller);
//   'async': every call returns a Promise resolved with a + b on a later turn (no busy message).
import { parentPort, workerData } from 'node:worker_threads';
import { createRequire } from 'node:module';

const addon = createRequire(import.meta.url)(workerData.addonPath);
const never = new Int32Array(new SharedArrayBuffer(4));
let n = 0;
const id = addon.createTarget((a, b, i) => {
  if (workerData.mode === 'async') return new Promise((resolve) => setImmediate(() => resolve(a + b)));
  if (n++ === workerData.at) {
    parentPort.postMessage({ busy: i });
    if (workerData.mode === 'block') Atomics.wait(never, 0, 0);
    else if (workerData.mode === 'pending') return new Promise(() => {});
    else process.exit(7);
  }
  return a + b;
});
parentPort.postMessage({ id });
