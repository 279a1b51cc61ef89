// SPDX-License-Identifier: MIT
'use strict';
// xthread-napi: where the headers are, for binding.gyp (the same shape as node-addon-api's index.js).
//
//   'dependencies': ["<!(node -p \"require('xthread-napi').gyp\")"]            // include folder + flags
//   'include_dirs': ["<!(node -p \"require('xthread-napi').include_dir\")"]    // the include folder only
//   'include_dirs': ["<!@(node -p \"require('xthread-napi').include\")"]       // the same (note the @)
const path = require('node:path');

// Absolute path of the folder holding xthread_napi/js_function.hpp and the core headers it includes.
const include_dir = path.join(__dirname, 'include');

module.exports = {
  include_dir,
  // The same path in double quotes, for a list expansion <!@(...) in include_dirs: gyp splits the output
  // like a shell and drops the quotes, so a path with spaces stays one entry. (With <!(...), without @,
  // the quotes would stay and gyp would take the path for a relative one: use include_dir there.)
  include: `"${include_dir}"`,
  // gyp dependency "<file>:<target>". gyp runs <!(...) in binding.gyp's folder and resolves the file
  // relative to it, so the path is relative to the current directory (absolute on another drive).
  gyp: `${path.relative('.', path.join(__dirname, 'xthread_napi.gyp'))}:xthread_napi`,
};
