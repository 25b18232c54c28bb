// The `pkb try` and `pkb agent` subcommands (cli_agentic.cpp).
#pragma once

#include "cli.h"

namespace pkb {

void add_try(CLI::App& app, Cli& cli);
void add_agent(CLI::App& app, Cli& cli);

}  // namespace pkb
