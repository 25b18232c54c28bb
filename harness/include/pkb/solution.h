// The candidate ABI. A candidate is one source file (.cu on GPU, .cpp in CPU
// mode) defining
//
//   std::vector<at::Tensor> solve(pkb::Context& ctx, const pkb::Inputs& in);
//
// and exporting it with PKB_SOLUTION(solve). The inputs are the problem's
// argument list (see its README); outputs must match the reference's count,
// shapes and dtypes. Local compute may use ATen and cuBLAS; cross-rank data
// moves through ctx.symmetric() buffers only (NCCL, c10d, MPI are rejected).
#pragma once

#include <ATen/ATen.h>
#include <torch/version.h>

#include <vector>

#include "pkb/check.h"
#include "pkb/context.h"
#include "pkb/inputs.h"

namespace pkb {

inline constexpr int kSolutionAbiVersion = 1;

using SolveFn = Outputs (*)(Context&, const Inputs&);

struct SolutionEntry {
  int abi_version;
  SolveFn solve;
  const char* torch_version;  // the libtorch the candidate was compiled against
};

}  // namespace pkb

#define PKB_SOLUTION_ENTRY_SYMBOL "pkb_solution_entry_v1"

#define PKB_SOLUTION(fn)                                                                   \
  extern "C" __attribute__((visibility("default"))) const ::pkb::SolutionEntry*            \
  pkb_solution_entry_v1() {                                                                \
    static const ::pkb::SolutionEntry entry{::pkb::kSolutionAbiVersion, &(fn),             \
                                            TORCH_VERSION};                                \
    return &entry;                                                                         \
  }
