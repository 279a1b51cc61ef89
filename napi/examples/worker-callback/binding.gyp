# SPDX-License-Identifier: MIT
{
  'targets': [
    {
      'target_name': 'worker_callback',
      'sources': [ 'worker_callback.cpp' ],
      # The include folder, NAPI_VERSION=8, C++20 and C++ exceptions (see xthread-napi's xthread_napi.gyp).
      'dependencies': [ "<!(node -p \"require('xthread-napi').gyp\")" ],
    },
  ],
}
