// The problems this build knows: one plugin per problems/NN_slug folder, built
// into <build>/problems/. The driver reads their specs; it never runs them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/selection.h"
#include "pkb/problem.h"

namespace pkb {

struct ProblemInfo {
  ProblemSpec spec;
  std::string lib_path;    // the plugin
  std::string source_dir;  // problems/NN_slug in the source tree
  std::shared_ptr<Problem> problem;
  std::string folder_name() const;  // "01_allreduce"
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
