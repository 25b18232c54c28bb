// The roofline of a pure data exchange (all-to-all, 27, 33, 36-38): (W-1)/W
// of the tensor leaves and as much arrives; HBM: read once, the output
// written once; no arithmetic.
#pragma once

#include "pkb/problem.h"

namespace pkb::blocks {

inline Cost all_to_all_cost(int world, const at::Tensor& x) {
  const double bytes = static_cast<double>(x.numel()) * x.element_size(), w = world;
  return {/*nvlink_bytes_per_rank=*/(w - 1) / w * bytes,
          /*hbm_bytes_per_rank=*/2.0 * bytes,
          /*flops_per_rank=*/0};
}

}  // namespace pkb::blocks
