// The task a model is given for one problem (`pkb prompt`; also the task file
// of each `pkb agent` attempt): the problem README, the C++ reference, the
// machine `t` describes, the candidate ABI headers and a worked example.
#pragma once

#include <string>

#include "common/topology_io.h"
#include "driver/problem_catalog.h"

namespace pkb {

std::string prompt_text(const ProblemInfo& problem, const Topology& t);

}  // namespace pkb
