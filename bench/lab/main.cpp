// SPDX-License-Identifier: MIT
// xthread-bench: the xthread lab driver. Each subcommand lives in its own files; this only wires them.
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "advise/command.hpp"
#include "common/flags.hpp"
#include "napi/command.hpp"
#include "pool/command.hpp"
#include "xcall/command.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "xthread lab: reproduces two performance studies (xcall = study 000 ThreadSafeFunctionPerf, napi = study 000 "
      "with Node-API beside xthread, pool = study 004 Eterfree; advise = where a callee should run, from study "
      "000's placements)",
      "xthread-bench"};
  app.require_subcommand(1);
  xthread_lab::CommandResult result;
  try {
    xthread_lab::register_xcall_command(app, result);
    xthread_lab::register_napi_command(app, result);
    xthread_lab::register_pool_command(app, result);
    xthread_lab::register_advise_command(app, result);
    // CLI11 would report a mistyped subcommand as "A subcommand is required"; name it instead.
    if (argc > 1 && argv[1][0] != '-') {
      std::string known;
      bool found = false;
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        found = found || sub->get_name() == argv[1];
        known += (known.empty() ? "" : ", ") + sub->get_name();
      }
      if (!found) {
        throw xthread_lab::UsageError(std::string("unknown subcommand '") + argv[1] + "' (expected " + known + ")");
      }
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every usage error exits 2 (CLI11's own exit codes differ per error kind); --help exits 0.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "xthread-bench: error: %s\n", e.what());
    return 2;
  } catch (const xthread_lab::UsageError& e) {
    std::fprintf(stderr, "xthread-bench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xthread-bench: error: %s\n", e.what());
    return 1;
  } catch (...) {
    // Nothing may leave main as std::terminate.
    std::fprintf(stderr, "xthread-bench: error: unknown exception\n");
    return 1;
  }
  return result.exit_code;
}
