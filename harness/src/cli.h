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

struct RunOptions;
// --timing and its options (NOTE [fresh inputs]), for every command that times.
void add_timing_flags(CLI::App* c, RunOptions& o);

}  // namespace pkb
