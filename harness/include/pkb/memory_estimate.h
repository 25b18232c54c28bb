// A problem's declared memory per rank (NOTE [memory admission] in
// harness/src/driver/memory_admission.h). Optional: a problem that expects a
// peak large enough to matter defines
//   int64_t memory_estimate(int world, int64_t m, int64_t n, bool cuda);
// returning the expected peak of one rank in bytes at this world size and
// base shape (0: unknown) -- its resident set on CPU, the caching
// allocator's reserved peak on a GPU, the harness's inputs, clones and the
// reference's outputs included -- and exports it with
// PKB_MEMORY_ESTIMATE(memory_estimate), saying in a comment how it was
// measured. The driver looks the symbol up (no code of the plugin runs to
// find it) and calls it before it launches an evaluation.
#pragma once

#include <cstdint>

#define PKB_MEMORY_ESTIMATE_SYMBOL "pkb_problem_memory_estimate_v1"

namespace pkb {
using MemoryEstimateFn = int64_t (*)(int world, int64_t m, int64_t n, bool cuda);
}  // namespace pkb

#define PKB_MEMORY_ESTIMATE(fn)                                                                          \
  extern "C" __attribute__((visibility("default"))) int64_t pkb_problem_memory_estimate_v1(              \
      int world, int64_t m, int64_t n, bool cuda) {                                                      \
    return fn(world, m, n, cuda);                                                                        \
  }
