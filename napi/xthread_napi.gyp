# SPDX-License-Identifier: MIT
# xthread-napi as a gyp dependency:
#   'dependencies': ["<!(node -p \"require('xthread-napi').gyp\")"]
# gives the depending target (only it: direct_dependent_settings) the include folder, NAPI_VERSION=8,
# C++20 and C++ exceptions. Node's common.gypi sets -std=gnu++17 and -fno-exceptions for C++ on Linux
# (Node 18 to 22): both are removed here, then -std=c++20 and -fexceptions are added. A target that wants a
# later standard adds its own -std= to cflags_cc (it comes after this one, and the last -std wins).
{
  'targets': [
    {
      'target_name': 'xthread_napi',
      'type': 'none',
      'direct_dependent_settings': {
        'include_dirs': [ 'include' ],
        'defines': [ 'NAPI_VERSION=8' ],
        'cflags!': [ '-fno-exceptions' ],
        'cflags_cc!': [ '-fno-exceptions', '-std=gnu++14', '-std=gnu++17', '-std=c++17' ],
        'cflags_cc': [ '-std=c++20', '-fexceptions' ],
        'conditions': [
          [ 'OS=="mac"', {
            'xcode_settings': {
              'CLANG_CXX_LANGUAGE_STANDARD': 'c++20',
              'GCC_ENABLE_CPP_EXCEPTIONS': 'YES',
            },
          } ],
          [ 'OS=="win"', {
            'msvs_settings': {
              'VCCLCompilerTool': {
                'ExceptionHandling': 1,
                'AdditionalOptions': [ '/std:c++20' ],
              },
            },
          } ],
        ],
      },
    },
  ],
}
