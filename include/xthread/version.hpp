// SPDX-License-Identifier: MIT
/// xthread/version.hpp — the library's version, for `#if` checks at compile time and for printing.
/// It equals project(xthread VERSION …) in the top-level CMakeLists.txt and the npm package's version
/// (checked by tests/version_test and napi/test/package.test.mjs).
/// @file
#pragma once

/// The major version number.
#define XTHREAD_VERSION_MAJOR 0
/// The minor version number.
#define XTHREAD_VERSION_MINOR 2
/// The patch version number.
#define XTHREAD_VERSION_PATCH 0
/// "MAJOR.MINOR.PATCH".
#define XTHREAD_VERSION_STRING "0.2.0"
/// MAJOR * 10000 + MINOR * 100 + PATCH, for `#if XTHREAD_VERSION >= 200`.
#define XTHREAD_VERSION (XTHREAD_VERSION_MAJOR * 10000 + XTHREAD_VERSION_MINOR * 100 + XTHREAD_VERSION_PATCH)
