// npm pack helper for xthread-napi (napi/package.json's prepack and postpack).
//
//   node scripts/stage-headers.mjs stage   copies ../include/xthread/errors.hpp into include/xthread/, so
//                                          the package's one include folder holds both headers
//   node scripts/stage-headers.mjs clean   removes that copy again (include/xthread/ is gitignored)
//
// js_function.hpp includes <xthread/errors.hpp>, which lives in the repository's root include/. A failed
// stage exits 1, which makes npm pack fail instead of writing a tarball without the header.
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, rmdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const napi = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(napi, '..', 'include', 'xthread', 'errors.hpp');
const stagedDir = join(napi, 'include', 'xthread');
const staged = join(stagedDir, 'errors.hpp');
const shown = (p) => relative(process.cwd(), p) || '.';

function fail(message) {
  console.error(`xthread-napi: ${message}`);
  process.exit(1);
}

const action = process.argv[2];
if (action === 'stage') {
  if (!existsSync(source)) {
    fail(`cannot stage the headers: ${shown(source)} not found. Pack from napi/ inside the xthread ` +
         'repository (js_function.hpp needs the core\'s xthread/errors.hpp).');
  }
  try {
    mkdirSync(stagedDir, { recursive: true });
    copyFileSync(source, staged);
  } catch (error) {
    fail(`cannot stage the headers: copying ${shown(source)} to ${shown(staged)} failed: ${error.message}`);
  }
  if (!existsSync(join(napi, 'include', 'xthread_napi', 'js_function.hpp'))) {
    fail('cannot stage the headers: include/xthread_napi/js_function.hpp is missing');
  }
  console.error(`xthread-napi: staged ${shown(source)} as ${shown(staged)} (removed again by postpack)`);
} else if (action === 'clean') {
  rmSync(staged, { force: true });
  if (existsSync(stagedDir) && readdirSync(stagedDir).length === 0) rmdirSync(stagedDir);
} else {
  fail('usage: node scripts/stage-headers.mjs stage|clean');
}
