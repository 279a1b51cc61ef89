// xthread/closed_error.hpp — the one error every closing xthread object reports.
#pragma once

#include <stdexcept>
#include <string>

namespace xthread {

/// Thrown (or stored in a future) when work cannot run because its target is closing:
/// - a ThreadSafeFunction was aborted, or its last reference was released;
/// - the EventLoop it targets has stopped or been destroyed before running the call;
/// - a ThreadPool was shut down (Shutdown::drop dropped the task, or submit came after shutdown).
/// The callee never ran when this error is reported. Catch `ClosedError` to tell "closing" apart
/// from an exception thrown by the callee itself, which is propagated unchanged.
class ClosedError : public std::runtime_error {
 public:
  explicit ClosedError(const std::string& what) : std::runtime_error("xthread: closed: " + what) {}
};

}  // namespace xthread
