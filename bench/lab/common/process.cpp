// SPDX-License-Identifier: MIT
#include "common/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

extern char** environ;

namespace xthread_lab {

int ProcessResult::exit_code() const { return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1; }

std::string ProcessResult::how_it_ended() const {
  if (WIFEXITED(wait_status)) return "status " + std::to_string(WEXITSTATUS(wait_status));
  std::string text = "signal " + std::to_string(WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0);
  if (timed_out) text += " (timed out)";
  return text;
}

ProcessResult run_process(const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                          const std::function<void()>& while_running) {
  if (args.empty()) throw std::runtime_error("run_process: no program given");
  TempDir io("xthread-lab-process-");
  const std::filesystem::path out_path = io.path() / "stdout";
  const std::filesystem::path err_path = io.path() / "stderr";
  std::vector<std::string> storage = args;
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const bool search_path = args[0].find('/') == std::string::npos;
  const int rc = search_path ? ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ)
                             : ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot run " + args[0] + ": " + std::strerror(rc));

  ProcessResult result;
  const auto start = std::chrono::steady_clock::now();
  const bool has_timeout = timeout.count() > 0;
  // Poll (10 ms steps) only when something must happen while the child runs; otherwise block in waitpid.
  bool polling = has_timeout || static_cast<bool>(while_running);
  auto next_call = start;
  while (true) {
    const pid_t done = ::waitpid(pid, &result.wait_status, polling ? WNOHANG : 0);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    if (done != 0) continue;  // EINTR
    const auto now = std::chrono::steady_clock::now();
    if (has_timeout && !result.timed_out && now - start >= timeout) {
      ::kill(pid, SIGKILL);  // our own child, by its id; then wait for it without polling
      result.timed_out = true;
      polling = false;
      continue;
    }
    if (while_running && now >= next_call) {
      while_running();
      next_call = now + std::chrono::milliseconds(250);
    }
    ::usleep(10'000);
  }
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  return result;
}

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a temporary directory: " + std::string(std::strerror(errno)));
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string last_line(const std::string& text) {
  std::string last;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

}  // namespace xthread_lab
