// SPDX-License-Identifier: MIT
// The Worker side of lab cases 2 and 3. Creates targets on this Worker's JS thread and posts their ids:
//   concat(a, b, i)      case 2: concatenates here
//   forward(a, b, i)     case 3: calls the main thread's concat synchronously through the addon
//                         (addon.callTargetSync blocks this thread until the main thread returned)
//   the same two as raw targets (bare napi_threadsafe_function, no bridge: the lab's "raw" rows), the raw
//   forward calling the main thread's raw concat with addon.callRawTargetSync
// Both record process.hrtime.bigint() (CLOCK_MONOTONIC) at entry and exit into stamps[2i], stamps[2i+1].
// config[0] is the extra busy time (ns) of the function that concatenates.
import { parentPort, workerData } from 'node:worker_threads';
import { createRequire } from 'node:module';

const { addonPath, stampsSab, configSab, mainTargetId, mainRawTargetId } = workerData;
const addon = createRequire(import.meta.url)(addonPath);
const stamps = new BigInt64Array(stampsSab);
const config = new Float64Array(configSab);
const hr = process.hrtime.bigint;

function spin(t0, ns) {
  if (ns > 0) {
    const end = t0 + BigInt(Math.round(ns));
    while (hr() < end);
  }
}

function concat(a, b, i) {
  const t0 = hr();
  const r = a + b;
  spin(t0, config[0]);
  stamps[2 * i] = t0;
  stamps[2 * i + 1] = hr();
  return r;
}

// fn(a, b, i) that records its entry and exit stamps around call(a, b, i), a blocking call to the main thread.
function stampedForward(call) {
  return (a, b, i) => {
    const t0 = hr();
    const r = call(a, b, i);
    stamps[2 * i] = t0;
    stamps[2 * i + 1] = hr();
    return r;
  };
}

const forward = stampedForward((a, b, i) => addon.callTargetSync(mainTargetId, a, b, i));
const rawForward = stampedForward((a, b, i) => addon.callRawTargetSync(mainRawTargetId, a, b, i));

const concatId = addon.createTarget(concat);
const forwardId = addon.createTarget(forward);
const rawConcatId = addon.createRawTarget(concat);
const rawForwardId = addon.createRawTarget(rawForward);
parentPort.postMessage({ concatId, forwardId, rawConcatId, rawForwardId });
