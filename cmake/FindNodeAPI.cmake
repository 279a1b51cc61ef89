# SPDX-License-Identifier: MIT
# FindNodeAPI: Node.js's C headers (node_api.h), from the system: nodesource's nodejs package or Debian's
# libnode-dev put them in /usr/include/node. A find module, so -DCMAKE_DISABLE_FIND_PACKAGE_NodeAPI=ON turns
# the probe off like every other optional package's.
#   NodeAPI_FOUND                  node_api.h was found
#   XTHREAD_NODE_API_INCLUDE_DIR   (cache) the folder holding it; set it to use other headers
find_path(XTHREAD_NODE_API_INCLUDE_DIR node_api.h
  HINTS /usr/include/node /usr/local/include/node
  PATH_SUFFIXES node
  DOC "directory holding node_api.h (Node.js headers)")
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NodeAPI REQUIRED_VARS XTHREAD_NODE_API_INCLUDE_DIR)
