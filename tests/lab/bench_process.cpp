#include "bench_process.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <cstdio>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace xthread_lab_test {
namespace {
std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "xthread-lab-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ProcessResult run_bench(const std::vector<std::string>& args) { return run_bench(args, std::chrono::milliseconds(0)); }

ProcessResult run_bench(const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
  // stdout/stderr go to files, not pipes: no deadlock however much the child writes.
  TempDir io;
  const std::string out_path = (io.path() / "stdout").string();
  const std::string err_path = (io.path() / "stderr").string();
  std::vector<std::string> argv_storage = {XTHREAD_BENCH_PATH};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error(std::string("cannot spawn ") + XTHREAD_BENCH_PATH);
  int status = 0;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, timeout.count() > 0 ? WNOHANG : 0);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
    if (done == 0 && std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);  // our own child, by its id
      timed_out = true;
      timeout = std::chrono::milliseconds(0);  // now wait for it without polling
    } else if (done == 0) {
      ::usleep(10'000);
    }
  }
  ProcessResult result;
  result.timed_out = timed_out;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  return result;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

namespace {
double load_average() {
  std::ifstream in("/proc/loadavg");
  double one_minute = 0;
  in >> one_minute;
  return one_minute;
}
}  // namespace

std::string machine_load_text() {
  char text[64];
  std::snprintf(text, sizeof text, "load average %.1f on %u cpus", load_average(), std::thread::hardware_concurrency());
  return text;
}

}  // namespace xthread_lab_test
