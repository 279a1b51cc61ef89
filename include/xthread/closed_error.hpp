// SPDX-License-Identifier: MIT
/// xthread/closed_error.hpp — kept for existing includes; the errors live in xthread/errors.hpp.
/// @file
#pragma once

#include "xthread/errors.hpp"
