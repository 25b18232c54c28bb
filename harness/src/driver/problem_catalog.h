// The problems this build knows: one plugin per problems/NN_slug folder, built
// into <build>/problems/. The driver reads their specs; it never runs them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/selection.h"
#include "pkb/memory_estimate.h"
#include "pkb/problem.h"

namespace pkb {

struct ProblemInfo {
  ProblemSpec spec;
  std::string lib_path;    // the plugin
  std::string source_dir;  // problems/NN_slug in the source tree
  std::shared_ptr<Problem> problem;
  MemoryEstimateFn memory_estimate = nullptr;  // pkb/memory_estimate.h
  std::string folder_name() const;  // "01_allreduce"
  // The declared peak of one rank, bytes (0: none declared; NOTE [memory admission]).
  int64_t memory_estimate_bytes(int world, int64_t m, int64_t n, bool cuda) const {
    return memory_estimate ? memory_estimate(world, m, n, cuda) : 0;
  }
};

class ProblemCatalog {
 public:
  static ProblemCatalog discover(const std::string& build_dir);
  const std::vector<ProblemInfo>& all() const { return problems_; }
  const ProblemInfo& by_id(int id) const;
  std::vector<ProblemName> names() const;
  std::vector<int> select(const std::string& selection) const { return parse_selection(selection, names()); }

 private:
  std::vector<ProblemInfo> problems_;
};

}  // namespace pkb
