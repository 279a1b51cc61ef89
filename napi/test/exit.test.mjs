// SPDX-License-Identifier: MIT
// The process ends (process.exit() or an uncaught exception) while C++ threads are in calls into its main
// thread: every pending and later call fails promptly with ClosedError and the process exits with its
// code, for sync and async callers, from libuv pool threads and from plain std::threads.
// Before the fix, every one of these children hung forever (Node joins its thread pool at exit).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { addonPath } from '../test-support/helpers.mjs';

const script = fileURLToPath(new URL('../test-support/exit-while-calling.mjs', import.meta.url));
const LIMIT_MS = 20_000;  // a child that has not exited by then hangs: it is killed and the test fails

function runChild(args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script, addonPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), LIMIT_MS);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, out, err });
    });
  });
}

for (const caller of ['pool', 'thread']) {
  for (const mode of ['sync', 'async']) {
    for (const how of ['exit', 'throw', 'pending']) {
      test(`${how} while a ${caller === 'pool' ? 'libuv pool thread' : 'std::thread'} is in ${mode} calls: the process exits with its code`, { timeout: LIMIT_MS + 10_000 }, async () => {
        const r = await runChild([caller, mode, how]);
        assert.equal(r.signal, null, `the child hung and was killed after ${LIMIT_MS} ms\n${r.err}`);
        assert.equal(r.code, how === 'throw' ? 1 : 7, r.err);
        if (how === 'throw') assert.match(r.err, /uncaught on purpose/);
        if (caller === 'thread') {
          const result = JSON.parse(r.out.trim().split('\n').pop());
          assert.equal(result.error, undefined, `the std::thread did not finish: ${result.error}`);
          // The first call succeeded; the one in flight (sync) or the ones queued (async) and every later
          // one were refused with ClosedError: nothing else, nothing lost.
          assert.ok(result.ok >= 1, JSON.stringify(result));
          assert.ok(result.closed >= 1, JSON.stringify(result));
          assert.equal(result.ok + result.closed + result.other, 1000, JSON.stringify(result));
          assert.equal(result.other, 0, JSON.stringify(result));
        }
      });
    }
  }
}
