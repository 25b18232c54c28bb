// The `pkb` command line (CLI11): subcommands, their flags and help.
#pragma once

#include <functional>
#include <memory>

namespace CLI {
class App;
}

namespace pkb {

struct Cli {
  std::unique_ptr<CLI::App> app;
  std::function<int()> action;  // the chosen subcommand, ready to run
};

// Builds the parser; after app->parse(), `action` runs what was asked.
Cli make_cli();

}  // namespace pkb
