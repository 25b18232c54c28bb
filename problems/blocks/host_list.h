// torch's .tolist() of an integer tensor (split sizes, counts, offsets): its
// values on the host as int64, row-major. A host sync, as in the published
// code: 10, 61, 64, 68, 70, 85 and moe_token_dispatcher.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace pkb::blocks {

inline std::vector<int64_t> host_list(const at::Tensor& t) {
  at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

}  // namespace pkb::blocks
