// The rooflines of pure data movement, which the collective primitives and
// the exchanges built on them share: the bytes of tensors, the all-to-all
// (08, 27, 33, 36-38) and the all-gather (02, 06, 34, 35). No arithmetic.
#pragma once

#include "pkb/problem.h"

namespace pkb::blocks {

inline double tensor_bytes(const at::Tensor& t) { return static_cast<double>(t.numel()) * t.element_size(); }

// The bytes and elements of arguments [0, n), each a tensor.
struct TensorsSize {
  double bytes = 0, elems = 0;
};

inline TensorsSize leading_tensors_size(const Inputs& in, size_t n) {
  TensorsSize s;
  for (size_t i = 0; i < n; ++i) {
    s.bytes += tensor_bytes(in.tensor(i));
    s.elems += static_cast<double>(in.tensor(i).numel());
  }
  return s;
}

// (W-1)/W of the tensor leaves and as much arrives; HBM: read once, the
// output written once.
inline Cost all_to_all_cost(int world, const at::Tensor& x) {
  const double bytes = tensor_bytes(x), w = world;
  return {/*nvlink_bytes_per_rank=*/(w - 1) / w * bytes,
          /*hbm_bytes_per_rank=*/2.0 * bytes,
          /*flops_per_rank=*/0};
}

// Every rank (the root, for a gather) receives the W-1 other tensors, each
// with `header_bytes` of its own (a shape exchange); HBM: the input read, the
// W-fold output written.
inline Cost all_gather_cost(int world, const at::Tensor& x, double header_bytes = 0) {
  const double bytes = tensor_bytes(x), w = world;
  return {/*nvlink_bytes_per_rank=*/(w - 1) * (bytes + header_bytes),
          /*hbm_bytes_per_rank=*/bytes + w * bytes,
          /*flops_per_rank=*/0};
}

}  // namespace pkb::blocks
