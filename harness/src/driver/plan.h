// The plan of a run: (problem x candidate x sample), in problem order.
#pragma once

#include <string>
#include <vector>

#include "driver/problem_catalog.h"

namespace pkb {

struct PlanItem {
  const ProblemInfo* problem = nullptr;
  std::string source;  // candidate source file; empty for the reference
  int sample = 0;
  std::string skip_reason;  // non-empty: not evaluated, and why
};

// Candidates for `problem` in `dir`: <dir>/<NN>_<slug>/sample_<k>.<ext>, or
// <dir>/<NN>_<slug>.<ext> as sample 0 (NN with or without a leading zero).
// CPU mode takes .cpp files, the GPU path .cu and .cpp; both take raw
// responses (.md, .txt). sample_<k>.response.md (pkb generate's raw reply,
// NOTE [generate files]) is sample k when no other file of it exists: a reply
// without code, which then builds as compile_error, "no code in the response".
std::vector<std::pair<int, std::string>> find_candidates(const std::string& dir, const ProblemInfo& problem,
                                                         const std::string& device);

// One item, with its skip reason when the problem cannot run on this device
// or at this world size.
PlanItem plan_item(const ProblemInfo& problem, const std::string& source, int sample, const std::string& device,
                   int world);

std::vector<PlanItem> make_plan(const ProblemCatalog& catalog, const std::vector<int>& ids,
                                const std::string& solutions, const std::string& device, int world);

}  // namespace pkb
