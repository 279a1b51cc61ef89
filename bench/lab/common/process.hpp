// SPDX-License-Identifier: MIT
// Child processes and temporary directories of the xthread lab: `napi` runs node, OutputDir::render_charts
// runs python, and the lab's tests run xthread-bench itself, all through run_process(). Every function may
// be called from any thread; a TempDir is used by one thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace xthread_lab {

// What a finished child did.
struct ProcessResult {
  int wait_status = 0;     // as waitpid reports it
  bool timed_out = false;  // killed (SIGKILL) because it outlived the timeout
  std::string out;         // everything it wrote to stdout
  std::string err;         // everything it wrote to stderr

  // Its exit status, or -1 when a signal ended it.
  int exit_code() const;
  // True when it exited with status 0.
  bool succeeded() const { return exit_code() == 0; }
  // "status 3", "signal 9" or "signal 9 (timed out)", for error messages.
  std::string how_it_ended() const;
};

// Runs argv[0] with the arguments argv[1...] and waits for it. argv[0] is a path, or a name looked up in
// PATH when it contains no '/'. stdin is /dev/null; stdout and stderr go to temporary files, not pipes, so
// the child never blocks however much it writes, and come back in the result. The environment is ours.
// With a timeout above zero the child is killed once it has run that long (timed_out). `while_running`, when
// given, is called on the calling thread about every 250 ms while the child runs (e.g. to refresh a progress
// line). Throws std::runtime_error when the child cannot be started (with the reason, e.g. "No such file or
// directory").
ProcessResult run_process(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                          const std::function<void()>& while_running = {});

// A fresh, empty directory under the system temporary directory (`prefix` + random suffix), removed with
// everything in it by the destructor. Throws std::runtime_error when it cannot be created.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "xthread-lab-");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The whole content of a file ("" when it cannot be read).
std::string read_file(const std::filesystem::path& path);

// The last line of `text` that is not blank ("" when there is none): what a failed child said last.
std::string last_line(const std::string& text);

}  // namespace xthread_lab
