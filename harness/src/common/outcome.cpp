#include "common/outcome.h"

#include "pkb/check.h"

namespace pkb {

namespace {
constexpr const char* kNames[] = {"harness_error",  "agent_error",   "compile_error", "forbidden_api", "load_error",
                                  "shape_mismatch", "runtime_error", "timeout",       "output_mismatch",
                                  "timing_anomaly", "correct"};
}

const char* outcome_name(Outcome o) { return kNames[static_cast<int>(o)]; }

Outcome outcome_from_name(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(Outcome::kCorrect); ++i) {
    if (name == kNames[i]) return static_cast<Outcome>(i);
  }
  PKB_CHECK(false, "unknown outcome '", name, "'");
}

}  // namespace pkb
