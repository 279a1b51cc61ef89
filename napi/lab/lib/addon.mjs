// SPDX-License-Identifier: MIT
// Locating and loading the xthread_napi.node addon.
//
// Order: an explicit path (--addon), then env XTHREAD_NAPI_ADDON, then the newest
// <repo>/build/*/napi/xthread_napi.node (CMake presets), then <repo>/build/napi/xthread_napi.node.
import { createRequire } from 'node:module';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ADDON_FILE = 'xthread_napi.node';
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export function findAddon(explicitPath) {
  if (explicitPath) return resolve(explicitPath);
  if (process.env.XTHREAD_NAPI_ADDON) return resolve(process.env.XTHREAD_NAPI_ADDON);
  const build = join(REPO_ROOT, 'build');
  const candidates = [];
  if (existsSync(build)) {
    for (const entry of readdirSync(build, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const nested = join(build, entry.name, 'napi', ADDON_FILE);
      if (existsSync(nested)) candidates.push(nested);
    }
    const flat = join(build, 'napi', ADDON_FILE);
    if (existsSync(flat)) candidates.push(flat);
  }
  if (candidates.length === 0) return null;
  candidates.sort((x, y) => statSync(y).mtimeMs - statSync(x).mtimeMs);
  return candidates[0];
}

const require = createRequire(import.meta.url);

// Returns { path, addon } or throws an Error with a one-line explanation.
export function loadAddon(explicitPath) {
  const path = findAddon(explicitPath);
  if (!path) {
    throw new Error(`${ADDON_FILE} not found: build it (cmake --build build/<preset>) or set XTHREAD_NAPI_ADDON`);
  }
  if (!existsSync(path)) throw new Error(`addon ${path} does not exist`);
  return { path, addon: require(path) };
}
