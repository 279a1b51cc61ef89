// SPDX-License-Identifier: MIT
// A process that ends while a C++ thread is blocked in a call into its main thread (run by
// napi/test/exit.test.mjs as a child process).
//
//   node exit-while-calling.mjs ADDON CALLER MODE HOW
//     CALLER  pool    the calls come from a libuv thread-pool thread (runCalls: napi_create_async_work)
//             thread  ... from a plain std::thread (runCallsOnThread)
//     MODE    sync    call_sync, one at a time: the call in flight is the one whose callee ends the process
//             async   call(): a thousand calls queued at once, then each future awaited
//     HOW     exit    the callee of the second call runs process.exit(7)
//             throw   the callee of the second call schedules an uncaught exception (process.nextTick)
//             pending the callee of the second call returns a Promise that never settles and schedules
//                     process.exit(7) (setTimeout): the call awaits the Promise when the process ends
//
// Node's exit path (process.exit() and an uncaught exception alike) emits 'exit', then joins its thread
// pool without running environment cleanup hooks, so a pool thread still blocked in the call would hang
// the process forever. The bridge fails every pending and later call of the environment with ClosedError
// from its own 'exit' listener. For CALLER thread, a second 'exit' listener (registered after the bridge's)
// waits up to 10 s for the std::thread to finish and prints its result as one JSON line on stdout.
import { createRequire } from 'node:module';

const [addonPath, caller, mode, how] = process.argv.slice(2);
const addon = createRequire(import.meta.url)(addonPath);

let calls = 0;
const id = addon.createTarget((a, b) => {
  calls += 1;
  if (calls === 2) {
    if (how === 'exit') process.exit(7);
    if (how === 'pending') {
      setTimeout(() => process.exit(7), 20);
      return new Promise(() => {});
    }
    process.nextTick(() => { throw new Error('uncaught on purpose'); });
  }
  return a + b;
});

const options = { a: 'a', b: 'b', calls: 1000, mode, stopOnError: false };
if (caller === 'pool') {
  addon.runCalls(id, options).then(() => {}, () => {});
} else {
  const handle = addon.runCallsOnThread(id, options);
  process.on('exit', () => {
    try {
      const r = addon.joinThreadCalls(handle, 10_000);
      process.stdout.write(JSON.stringify({ ok: r.ok, closed: r.closed, other: r.jsErrors + r.conversionErrors + r.otherErrors }) + '\n');
    } catch (e) {
      process.stdout.write(JSON.stringify({ error: String(e.message) }) + '\n');
    }
  });
}
