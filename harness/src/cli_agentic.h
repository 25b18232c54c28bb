// The `pkb try`, `pkb agent` and `pkb generate` subcommands (cli_agentic.cpp).
#pragma once

#include "cli.h"

namespace pkb {

void add_try(CLI::App& app, Cli& cli);
void add_agent(CLI::App& app, Cli& cli);
void add_generate(CLI::App& app, Cli& cli);

}  // namespace pkb
