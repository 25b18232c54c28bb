// dlopen of problem and candidate plugins. A plugin exports one versioned
// extern "C" entry symbol (PKB_PROBLEM / PKB_SOLUTION); loading runs none of
// its code beyond static initialisers, and the entry's version is checked
// before anything else is called. Plugins are never unloaded (their code may
// still own objects, threads or CUDA state).
#pragma once

#include <memory>
#include <string>

#include "pkb/memory_estimate.h"
#include "pkb/problem.h"
#include "pkb/solution.h"

namespace pkb {

// A candidate that cannot be loaded: missing or old entry symbol, wrong ABI
// version, undefined symbol. The message names the file.
class LoadError : public Error {
 public:
  using Error::Error;
};

struct LoadedProblem {
  std::string path;
  std::shared_ptr<Problem> problem;
  MemoryEstimateFn memory_estimate = nullptr;  // PKB_MEMORY_ESTIMATE, when the problem declares one
};

struct LoadedSolution {
  std::string path;
  SolveFn solve = nullptr;
  std::string torch_version;
};

LoadedProblem load_problem_plugin(const std::string& path);
LoadedSolution load_solution_plugin(const std::string& path);

}  // namespace pkb
