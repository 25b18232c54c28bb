// The benchmark's 87 problems and their categories, as static data: scoring
// must count a problem a run never recorded as a failure, so the universe
// cannot come from the results themselves.
#pragma once

#include <string>
#include <vector>

namespace pkb {

struct ProblemEntry {
  int id;
  const char* slug;
  const char* category;
};

inline constexpr int kProblemCount = 87;

// All problems, ordered by id.
const std::vector<ProblemEntry>& problem_index();
// The categories in the catalog's (and the published table's) order.
const std::vector<std::string>& category_order();
// nullptr when `id` is not a benchmark problem.
const ProblemEntry* find_problem(int id);

}  // namespace pkb
