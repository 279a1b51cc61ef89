// SPDX-License-Identifier: MIT
// Shared by the napi tests (napi/test/; kept out of that folder because node --test runs every .mjs file in a
// folder named test): loads the built addon (env XTHREAD_NAPI_ADDON, else the newest
// build/*/napi/xthread_napi.node; see napi/lab/lib/addon.mjs).
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { loadAddon } from '../lab/lib/addon.mjs';

export const { addon, path: addonPath } = loadAddon();

// A Worker running napi/test-support/blocking-worker.mjs; resolves once its target exists.
// mode: 'block' (call number `at` blocks in Atomics.wait until the Worker is terminated),
//       'exit'  (call number `at` calls process.exit() inside the Worker);
//       and the others listed in blocking-worker.mjs. lateMs: how long the 'late' modes block (default 200).
export async function startBlockingWorker(mode, at, lateMs = 200) {
  const worker = new Worker(fileURLToPath(new URL('./blocking-worker.mjs', import.meta.url)), {
    workerData: { addonPath, mode, at, lateMs },
  });
  const [msg] = await once(worker, 'message');
  return { worker, id: msg.id };
}

// Resolves with the first message from `worker` satisfying pred.
export function nextMessage(worker, pred) {
  return new Promise((resolve) => {
    const on = (m) => {
      if (pred(m)) {
        worker.off('message', on);
        resolve(m);
      }
    };
    worker.on('message', on);
  });
}
