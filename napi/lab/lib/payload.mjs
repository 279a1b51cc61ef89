// SPDX-License-Identifier: MIT
// Payloads of the study: total length split in two halves; 10 is the literal 'Hello' + 'World'.
// Other sizes are printable ASCII (one byte per char in UTF-8), deterministic, not a single repeated char.
const ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

function text(length, salt) {
  let s = '';
  let x = (salt * 2654435761) >>> 0;
  const chunk = [];
  for (let i = 0; i < Math.min(length, 4096); i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    chunk.push(ALPHABET[(x >>> 16) % ALPHABET.length]);
  }
  const block = chunk.join('');
  while (s.length + block.length <= length) s += block;
  return s + block.slice(0, length - s.length);
}

export function makePayload(total) {
  if (total === 10) return { a: 'Hello', b: 'World' };
  const half = Math.floor(total / 2);
  return { a: text(half, 1), b: text(total - half, 2) };
}
