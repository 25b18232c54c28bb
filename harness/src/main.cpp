// pkb: parse the command line, run the chosen command, map errors to exit codes.
// The flow of `pkb run` is in driver/run_command.cpp (plan, build, evaluate,
// report); one rank's flow is in worker/worker.cpp.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>

#include "cli.h"
#include "common/outcome.h"
#include "driver/zygote.h"
#include "pkb/check.h"
#include "worker/worker.h"

int main(int argc, char** argv) {
  // NOTE [zygote]: first, while this process has one thread and nothing else.
  if (argc < 2 || (std::strcmp(argv[1], "worker") != 0 && std::strcmp(argv[1], "contestant") != 0))
    pkb::Zygote::start([](const std::vector<std::string>& a) {
      return a.size() == 3 && a[1] == "worker" ? pkb::worker_main(a[2]) : pkb::kWorkerExitHarnessError;
    });
  pkb::Cli cli = pkb::make_cli();
  try {
    cli.app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = cli.app->exit(e);
    return rc == 0 ? pkb::kExitAllCorrect : pkb::kExitUsage;
  }
  try {
    return cli.action();
  } catch (const pkb::Error& e) {
    // Bad selections, missing folders, refused overwrites: the user's to fix.
    std::fprintf(stderr, "pkb: error: %s\n", e.what());
    return pkb::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pkb: internal error: %s\n", e.what());
    return pkb::kExitHarnessError;
  }
}
