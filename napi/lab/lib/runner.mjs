// SPDX-License-Identifier: MIT
// XcallLab: runs measured points of the Node-API cross-thread call lab.
//
//   case 1: C++ thread -> main JS thread concatenates and returns
//   case 2: C++ thread -> worker_threads Worker concatenates and returns
//   case 3: C++ thread -> Worker, whose JS calls the main thread synchronously through the addon
//
// Two implementations of the same call, impl 'bridge' (xthread_napi::JsFunction::call_sync) and 'raw'
// (a bare napi_threadsafe_function + a C++ condition-variable wait, the study's method): the same C++
// caller thread, JS functions, payloads and timestamps, so their difference is the bridge's own cost.
//
// For every call: C++ records issue/resume (steady_clock = CLOCK_MONOTONIC) around call_sync; the callee
// records entry/exit with process.hrtime.bigint() (CLOCK_MONOTONIC). Phases per call:
//   total = resume - issue, schedule = entry - issue, execute = exit - entry, notify = resume - exit.
// The C++ thread verifies every returned string against a + b.
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

const hr = process.hrtime.bigint;
const WORKER_URL = new URL('../worker.mjs', import.meta.url);

export class XcallLab {
  // addon: the loaded module; addonPath: its path (the Worker loads it too); maxCalls: upper bound of
  // warmup + calls of any point (sizes the shared stamp buffers).
  constructor({ addon, addonPath, maxCalls }) {
    this.addon = addon;
    this.addonPath = addonPath;
    this.capacity = Math.max(1, maxCalls);
    this.stampsSab = new SharedArrayBuffer(this.capacity * 2 * 8);
    this.stamps = new BigInt64Array(this.stampsSab); // outer callee of the current point
    this.inner = new BigInt64Array(this.capacity * 2); // main concat when it is the inner call (case 3)
    this.configSab = new SharedArrayBuffer(8);
    this.config = new Float64Array(this.configSab); // [0] = work ns
    this.mainStamps = this.stamps;
    this.worker = null;
    this.workerIds = null;
    const self = this;
    const mainConcat = function mainConcat(a, b, i) {
      const t0 = hr();
      const r = a + b;
      const ns = self.config[0];
      if (ns > 0) {
        const end = t0 + BigInt(Math.round(ns));
        while (hr() < end);
      }
      const s = self.mainStamps;
      s[2 * i] = t0;
      s[2 * i + 1] = hr();
      return r;
    };
    this.mainTargetId = addon.createTarget(mainConcat);
    this.mainRawTargetId = addon.createRawTarget(mainConcat);
  }

  async startWorker() {
    if (this.worker) return;
    this.worker = new Worker(fileURLToPath(WORKER_URL), {
      workerData: {
        addonPath: this.addonPath,
        stampsSab: this.stampsSab,
        configSab: this.configSab,
        mainTargetId: this.mainTargetId,
        mainRawTargetId: this.mainRawTargetId,
      },
    });
    const [ids] = await Promise.race([
      once(this.worker, 'message'),
      once(this.worker, 'error').then(([e]) => Promise.reject(e)),
    ]);
    this.workerIds = ids;
  }

  // point: { kase: 1|2|3, impl: 'bridge'|'raw', a, b, workNs, calls, warmup, gapMinNs, gapMaxNs, seed }
  // Returns { samples: { total_ns, schedule_ns, execute_ns, notify_ns } (arrays, one number per measured
  // call), cpuUsPerCall }: the process's CPU time (every thread: callers, JS threads, libuv) over the
  // point's warm-up and measured calls, divided by their number.
  async runPoint({ kase, impl = 'bridge', a, b, workNs = 0, calls, warmup = 0, gapMinNs = 0, gapMaxNs = 0, seed = 1 }) {
    const total = calls + warmup;
    if (total > this.capacity) throw new Error(`point needs ${total} stamp slots, lab has ${this.capacity}`);
    if (impl !== 'bridge' && impl !== 'raw') throw new Error(`unknown impl "${impl}" (bridge or raw)`);
    const raw = impl === 'raw';
    let id;
    if (kase === 1) id = raw ? this.mainRawTargetId : this.mainTargetId;
    else {
      await this.startWorker();
      const w = this.workerIds;
      id = kase === 2 ? (raw ? w.rawConcatId : w.concatId) : raw ? w.rawForwardId : w.forwardId;
    }
    this.config[0] = workNs;
    this.mainStamps = kase === 1 ? this.stamps : this.inner;
    this.stamps.fill(0n, 0, 2 * total);
    const cpuStart = process.cpuUsage();
    const r = await this.addon.runCalls(id, { a, b, calls, warmup, gapMinNs, gapMaxNs, seed, mode: 'sync', raw });
    const cpu = process.cpuUsage(cpuStart);
    if (r.ok !== total || r.firstError) {
      throw new Error(`case ${kase}: ${r.ok}/${total} calls succeeded; first error: ${r.firstError ?? 'none'}`);
    }
    if (r.mismatches !== 0) throw new Error(`case ${kase}: ${r.mismatches} returned strings did not equal a + b`);
    const out = { total_ns: [], schedule_ns: [], execute_ns: [], notify_ns: [] };
    for (let i = 0; i < calls; i++) {
      const j = warmup + i;
      const t0 = r.issueNs[i], t1 = this.stamps[2 * j], t2 = this.stamps[2 * j + 1], t3 = r.resumeNs[i];
      if (t1 === 0n || t2 === 0n) throw new Error(`case ${kase}: callee did not record call ${j}`);
      if (!(t0 <= t1 && t1 <= t2 && t2 <= t3)) {
        throw new Error(`case ${kase}: timestamps out of order on call ${j} (clocks not comparable?)`);
      }
      out.total_ns.push(Number(t3 - t0));
      out.schedule_ns.push(Number(t1 - t0));
      out.execute_ns.push(Number(t2 - t1));
      out.notify_ns.push(Number(t3 - t2));
    }
    return { samples: out, cpuUsPerCall: (cpu.user + cpu.system) / total };
  }

  // Releases every target; the Worker then has nothing keeping it alive and exits by itself.
  async close() {
    if (this.worker) {
      const exited = once(this.worker, 'exit');
      this.addon.dropTarget(this.workerIds.concatId);
      this.addon.dropTarget(this.workerIds.forwardId);
      this.addon.dropRawTarget(this.workerIds.rawConcatId);
      this.addon.dropRawTarget(this.workerIds.rawForwardId);
      const watchdog = setTimeout(() => this.worker.terminate(), 5000);
      await exited;
      clearTimeout(watchdog);
      this.worker = null;
    }
    this.addon.dropTarget(this.mainTargetId);
    this.addon.dropRawTarget(this.mainRawTargetId);
  }
}
