// SPDX-License-Identifier: MIT
// The npm package xthread-napi (napi/package.json, index.js, xthread_napi.gyp): cheap facts, nothing built
// or packed (napi/examples/test-from-tarball.sh, ctest napi.example_addon, packs and builds).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const napi = join(dirname(fileURLToPath(import.meta.url)), '..');
const root = join(napi, '..');
const pkg = JSON.parse(readFileSync(join(napi, 'package.json'), 'utf8'));
const require = createRequire(import.meta.url);

test('the package version is the CMake project version', () => {
  const cmake = readFileSync(join(root, 'CMakeLists.txt'), 'utf8');
  const match = /project\(xthread\s+VERSION\s+(\d+\.\d+\.\d+)/.exec(cmake);
  assert.ok(match, 'no project(xthread VERSION x.y.z in the root CMakeLists.txt');
  assert.equal(pkg.version, match[1]);
});

test('package.json: name, entry point, engines, license, no dependencies, pack scripts', () => {
  assert.equal(pkg.name, 'xthread-napi');
  assert.equal(pkg.main, 'index.js');
  assert.equal(pkg.engines?.node, '>=18');
  assert.equal(pkg.license, 'MIT');
  assert.match(readFileSync(join(root, 'LICENSE'), 'utf8'), /^MIT License\n\nCopyright \(c\) \d{4} the xthread authors\n/);
  assert.equal(pkg.private, undefined);
  for (const key of ['dependencies', 'peerDependencies', 'optionalDependencies', 'bundleDependencies']) {
    assert.equal(pkg[key], undefined, key);
  }
  assert.match(pkg.scripts.prepack, /scripts\/stage-headers\.mjs stage$/);
  assert.match(pkg.scripts.postpack, /scripts\/stage-headers\.mjs clean$/);
  assert.ok(existsSync(join(napi, 'scripts', 'stage-headers.mjs')));
});

test('files: the bridge header, the staged core headers, index.js, the gyp helper, the README and the license', () => {
  assert.deepEqual([...pkg.files].sort(), ['LICENSE', 'README.md', 'include/xthread/', 'include/xthread_napi/js_function.hpp',
                                           'include/xthread_napi/spin.hpp', 'index.js', 'xthread_napi.gyp']);
  // include/xthread/ and LICENSE are staged by prepack from the repository (see below).
  for (const file of pkg.files.filter((f) => f !== 'include/xthread/' && f !== 'LICENSE')) {
    assert.ok(existsSync(join(napi, file)), `${file} is missing`);
  }
  // include/xthread/ is staged by prepack: every core header the bridge includes, transitively, from the
  // repository's include/ (the list the tarball test expects too).
  const list = spawnSync(process.execPath, [join(napi, 'scripts', 'stage-headers.mjs'), 'list'], { encoding: 'utf8' });
  assert.equal(list.status, 0, list.stderr);
  const staged = list.stdout.trim().split('\n');
  // Public headers only: the bridge includes no internal (detail/) header of the core.
  assert.deepEqual(staged, ['xthread/errors.hpp']);
  for (const header of staged) assert.ok(existsSync(join(root, 'include', header)), header);
});

test('index.js exports include_dir, include (quoted) and gyp', () => {
  const index = require('../index.js');
  assert.deepEqual(Object.keys(index).sort(), ['gyp', 'include', 'include_dir']);
  assert.ok(isAbsolute(index.include_dir));
  assert.equal(index.include_dir, join(napi, 'include'));
  assert.ok(existsSync(join(index.include_dir, 'xthread_napi', 'js_function.hpp')));
  assert.equal(index.include, `"${index.include_dir}"`);
  const [file, target] = index.gyp.split(':');
  assert.equal(target, 'xthread_napi');
  assert.equal(resolve(file), join(napi, 'xthread_napi.gyp'));
});

test('xthread_napi.gyp names the target and adds the include folder, NAPI_VERSION, C++20 and exceptions', () => {
  const gyp = readFileSync(join(napi, 'xthread_napi.gyp'), 'utf8');
  assert.match(gyp, /'target_name': 'xthread_napi'/);
  assert.match(gyp, /'type': 'none'/);
  assert.match(gyp, /'direct_dependent_settings'/);
  assert.match(gyp, /'include_dirs': \[ 'include' \]/);
  assert.match(gyp, /NAPI_VERSION=8/);
  assert.match(gyp, /'cflags_cc!': \[[^\]]*'-fno-exceptions'[^\]]*'-std=gnu\+\+17'/);
  assert.match(gyp, /'cflags_cc': \[ '-std=c\+\+20', '-fexceptions' \]/);
});

test('the staged header folder is gitignored and the CMake target puts the root include/ first', () => {
  assert.match(readFileSync(join(root, '.gitignore'), 'utf8'), /^napi\/include\/xthread\/$/m);
  assert.match(readFileSync(join(root, '.gitignore'), 'utf8'), /^napi\/LICENSE$/m);
  const cmake = readFileSync(join(napi, 'CMakeLists.txt'), 'utf8');
  assert.match(cmake, /target_include_directories\(xthread_napi INTERFACE \$\{CMAKE_CURRENT_SOURCE_DIR\}\/\.\.\/include\s+\$\{CMAKE_CURRENT_SOURCE_DIR\}\/include\)/);
});
