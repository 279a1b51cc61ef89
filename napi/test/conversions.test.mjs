// SPDX-License-Identifier: MIT
// Round trips through a C++ thread: JS value -> C++ T -> fn(T) on the JS thread -> C++ T -> JS value.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addon } from '../test-support/helpers.mjs';

const MODES = ['sync', 'async', 'inline'];
const T = { timeout: 20_000 };
const echo = (type, fn, value, mode) => Promise.resolve().then(() => addon.echo(type, fn, value, mode));
const identity = (x) => x;

for (const mode of MODES) {
  test(`strings round-trip (${mode})`, T, async () => {
    const big = 'xyz'.repeat(400_000);
    for (const s of ['', 'HelloWorld', 'héllo wörld ✓ 😀', 'nul\0inside', big, 'é'.repeat(100_000)]) {
      assert.equal(await echo('string', identity, s, mode), s);
    }
    assert.equal(await echo('string', (s) => s + '!', 'Hello', mode), 'Hello!');
  });

  test(`numbers round-trip (${mode})`, T, async () => {
    for (const d of [0, -1.5, 1e308, Number.MIN_VALUE, Infinity, -Infinity]) {
      assert.equal(await echo('double', identity, d, mode), d);
    }
    assert.ok(Number.isNaN(await echo('double', identity, NaN, mode)));
    assert.equal(await echo('double', (x) => x * 2, 21, mode), 42);
    for (const i of [0, -1, 2 ** 53, -(2 ** 53), 123456789012]) assert.equal(await echo('int64', identity, i, mode), i);
    for (const b of [2n ** 62n, -(2n ** 63n), 2n ** 63n - 1n]) assert.equal(await echo('int64', identity, b, mode), b);
    assert.equal(await echo('int64', () => 5n, 1, mode), 5); // small BigInt comes back as a number
    for (const i of [0, 2 ** 31 - 1, -(2 ** 31)]) assert.equal(await echo('int32', identity, i, mode), i);
  });

  test(`booleans and void (${mode})`, T, async () => {
    assert.equal(await echo('bool', identity, true, mode), true);
    assert.equal(await echo('bool', (b) => !b, true, mode), false);
    let seen = null;
    assert.equal(await echo('void', (s) => { seen = s; return 42; }, 'side effect', mode), undefined);
    assert.equal(seen, 'side effect');
  });

  test(`buffers round-trip (${mode})`, T, async () => {
    const bytes = Buffer.from([0, 1, 2, 250, 255]);
    assert.deepEqual(await echo('buffer', identity, bytes, mode), bytes);
    assert.deepEqual(await echo('buffer', identity, Buffer.alloc(0), mode), Buffer.alloc(0));
    const got = await echo('buffer', (b) => { assert.ok(Buffer.isBuffer(b)); return new Uint8Array([...b].reverse()); }, bytes, mode);
    assert.deepEqual([...got], [255, 250, 2, 1, 0]);
    assert.deepEqual([...(await echo('buffer', () => new Uint8Array([9, 8]).buffer, bytes, mode))], [9, 8]);
    assert.deepEqual([...(await echo('buffer', () => new DataView(new Uint8Array([7]).buffer), bytes, mode))], [7]);
    assert.equal((await echo('buffer', () => new Uint16Array([1, 2, 3]), bytes, mode)).length, 6);
    const large = Buffer.alloc(1 << 20, 0xab);
    assert.ok((await echo('buffer', identity, large, mode)).equals(large));
  });

  test(`a return value of the wrong type is a conversion error (${mode})`, T, async () => {
    const cases = [
      ['string', () => 42, 'x', /expected string, got number/],
      ['double', () => '1', 1, /expected number, got string/],
      ['int64', () => 1.5, 1, /integer/],
      ['int64', () => 2 ** 60, 1, /2\^53/],
      ['int64', () => 2n ** 64n, 1, /does not fit/],
      ['int32', () => 2 ** 31, 1, /int32/],
      ['bool', () => 1, true, /expected boolean, got number/],
      ['buffer', () => [1, 2], Buffer.alloc(1), /expected Buffer, TypedArray, DataView or ArrayBuffer, got object/],
      ['string', () => undefined, 'x', /got undefined/],
    ];
    for (const [type, fn, value, re] of cases) {
      await assert.rejects(echo(type, fn, value, mode), (e) => e.code === 'XTHREAD_NAPI_CONVERSION' && re.test(e.message),
                           `${type} ${fn}`);
    }
  });
}

test('an argument of the wrong type is rejected before any call', T, () => {
  let called = false;
  assert.throws(() => addon.echo('string', () => { called = true; }, 42, 'sync'), { code: 'XTHREAD_NAPI_CONVERSION' });
  assert.throws(() => addon.echo('string', 'not a function', 'x', 'sync'), { code: 'XTHREAD_NAPI_CONVERSION', message: /expected function/ });
  assert.equal(called, false);
});
