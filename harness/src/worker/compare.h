// Output comparison (DESIGN.md §5 step 2): count, shape and dtype exactly, then
// values in float32 with the problem's tolerance. A value matches when
// |cand - ref| <= atol + rtol * |ref|, or both are the same infinity, or both
// are NaN; so NaN or Inf where the reference has a finite value is a mismatch.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "common/outcome.h"
#include "common/results.h"
#include "pkb/inputs.h"
#include "pkb/problem.h"

namespace pkb {

struct OutputDiff {
  int index = 0;
  std::vector<int64_t> shape;
  std::string dtype;
  int64_t numel = 0;
  int64_t mismatches = 0;
  bool values_checked = true;
  double max_abs_err = 0;  // over elements where both are finite
  double max_rel_err = 0;  // same, where ref != 0
  std::vector<int64_t> first_bad_index;  // empty when none
  double first_bad_ref = 0, first_bad_got = 0;
};

struct CompareResult {
  Outcome outcome = Outcome::kCorrect;  // kCorrect, kShapeMismatch or kOutputMismatch
  std::string reason;
  std::vector<OutputDiff> outputs;
};

// `checked[i]` false: output i's values are not compared (see
// Problem::values_checked); empty means all are.
CompareResult compare_outputs(const Outputs& ref, const Outputs& got, const Tolerance& tol,
                              const std::vector<bool>& checked = {});
Json to_json(const CompareResult& c);

}  // namespace pkb
