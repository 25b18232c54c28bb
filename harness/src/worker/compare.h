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

// Where the values are compared (NOTE [comparison where the outputs are]):
// kHost, one pass over both outputs on the host; kDevice, torch's elementwise
// ops on the GPU that holds both (else the host's pass). The verdict, the
// counts and the errors are the same.
enum class CompareOn { kHost, kDevice };

// `checked[i]` false: output i's values are not compared (see
// Problem::values_checked); empty means all are.
CompareResult compare_outputs(const Outputs& ref, const Outputs& got, const Tolerance& tol,
                              const std::vector<bool>& checked = {}, CompareOn on = CompareOn::kHost);
Json to_json(const CompareResult& c);

// The two ways of comparing one output's values (same shape and dtype), which
// fill `d`'s value fields (mismatches, errors, first bad element) alike
// (Compare.HostPassAndTensorOpsAgree): exposed for that test. The second
// computes where the outputs are, both on the host or both on one GPU.
void compare_values_host(const at::Tensor& ref, const at::Tensor& got, const Tolerance& tol, OutputDiff* d);
void compare_values_tensor_ops(const at::Tensor& ref, const at::Tensor& got, const Tolerance& tol, OutputDiff* d);

}  // namespace pkb
