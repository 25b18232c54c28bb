// The GEMM-then-collective problems of the tensor-parallel linears (13, 14,
// 16): this rank's operands A (M, K) and B (K, N), randn in that order (the
// published RNG order), and the sizes their rooflines read back.
#pragma once

#include <string>

#include "pkb/problem.h"

namespace pkb::blocks {

inline Inputs gemm_operands(const InputRequest& req, const std::string& a_name, const std::string& b_name, int64_t m,
                            int64_t k, int64_t n) {
  auto opts = req.options();
  at::Tensor a = at::randn({m, k}, opts);
  at::Tensor b = at::randn({k, n}, opts);
  return {{a_name, a}, {b_name, b}};
}

// M, K and N of A·B (arguments 0 and 1), and the element size in bytes.
struct GemmSizes {
  double m, k, n, e;
};

inline GemmSizes gemm_sizes(const Inputs& in) {
  const auto [a, b] = in.tensors<2>();
  return {static_cast<double>(a.size(0)), static_cast<double>(a.size(1)), static_cast<double>(b.size(1)),
          static_cast<double>(a.element_size())};
}

}  // namespace pkb::blocks
