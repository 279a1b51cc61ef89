// SPDX-License-Identifier: MIT
// npm pack helper for xthread-napi (napi/package.json's prepack and postpack).
//
//   node scripts/stage-headers.mjs stage   copies the core headers the bridge includes (<xthread/...>,
//                                          followed transitively from js_function.hpp) from the
//                                          repository's include/ into include/xthread/, so the package's one
//                                          include folder holds everything it needs
//                                          and the repository's LICENSE into the package root
//   node scripts/stage-headers.mjs clean   removes include/xthread/ and LICENSE again (both gitignored)
//   node scripts/stage-headers.mjs list    prints the staged headers' paths relative to include/, one per line
//
// A failed stage exits 1, which makes npm pack fail instead of writing a tarball that does not compile.
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const napi = join(dirname(fileURLToPath(import.meta.url)), '..');
const coreInclude = join(napi, '..', 'include');
const packageInclude = join(napi, 'include');
const bridgeHeader = join(packageInclude, 'xthread_napi', 'js_function.hpp');
const license = join(napi, '..', 'LICENSE');
const packageLicense = join(napi, 'LICENSE');
const shown = (p) => relative(process.cwd(), p) || '.';

function fail(message) {
  console.error(`xthread-napi: ${message}`);
  process.exit(1);
}

// The core headers (paths under include/, e.g. "xthread/errors.hpp") that `file` includes, transitively.
function coreHeadersOf(file, found = new Set()) {
  const text = readFileSync(file, 'utf8');
  for (const match of text.matchAll(/^\s*#\s*include\s*[<"](xthread\/[^>"]+)[>"]/gm)) {
    const header = match[1];
    if (found.has(header)) continue;
    const source = join(coreInclude, header);
    if (!existsSync(source)) {
      fail(`cannot stage the headers: ${shown(file)} includes <${header}>, but ${shown(source)} does not exist. ` +
           'Pack from napi/ inside the xthread repository.');
    }
    found.add(header);
    coreHeadersOf(source, found);
  }
  return found;
}

const action = process.argv[2];
if (action === 'stage' || action === 'list') {
  if (!existsSync(bridgeHeader)) fail(`cannot stage the headers: ${shown(bridgeHeader)} is missing`);
  const headers = [...coreHeadersOf(bridgeHeader)].sort();
  if (action === 'list') {
    process.stdout.write(headers.map((h) => `${h}\n`).join(''));
  } else {
    try {
      // Start from an empty folder: a header left by an interrupted pack must not ship (files: include/xthread/).
      rmSync(join(packageInclude, 'xthread'), { recursive: true, force: true });
      for (const header of headers) {
        mkdirSync(dirname(join(packageInclude, header)), { recursive: true });
        copyFileSync(join(coreInclude, header), join(packageInclude, header));
      }
      copyFileSync(license, packageLicense);  // the package ships the project's MIT license (files: LICENSE)
    } catch (error) {
      fail(`cannot stage the headers: ${error.message}`);
    }
    console.error(`xthread-napi: staged ${headers.join(', ')} from ${shown(coreInclude)} into ` +
                  `${shown(packageInclude)}, and ${shown(license)} (removed again by postpack)`);
  }
} else if (action === 'clean') {
  rmSync(join(packageInclude, 'xthread'), { recursive: true, force: true });
  rmSync(packageLicense, { force: true });
} else {
  fail('usage: node scripts/stage-headers.mjs stage|clean|list');
}
