// The published hand-written Adam step (no weight decay, bias-corrected), as
// the DDP/ZeRO references (40-43) spell it, with their rounding order: bf16
// after every op; `m / bc1` as CUDA computes it (NOTE [python numbers]).
#pragma once

#include <cmath>

#include "../blocks/python_scalars.h"
#include "pkb/check.h"
#include "pkb/inputs.h"

namespace pkb::blocks {

struct AdamHyper {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0;
  int64_t step = 0;
};

// The arguments lr, beta1, beta2, eps, step from `first` on.
inline AdamHyper adam_hyper(const Inputs& in, size_t first) {
  AdamHyper h{in.real(first), in.real(first + 1), in.real(first + 2), in.real(first + 3), in.integer(first + 4)};
  PKB_CHECK(h.step >= 1, "step must be at least 1");
  return h;
}

// The published hyper-parameters: lr 1e-3, betas (0.9, 0.999), eps 1e-8,
// step 1 + (trial mod 7).
inline void add_adam_hyper(Inputs& in, int trial) {
  in.add("lr", 1e-3);
  in.add("beta1", 0.9);
  in.add("beta2", 0.999);
  in.add("eps", 1e-8);
  in.add("step", static_cast<int64_t>(1 + trial % 7));
}

// m, v and w updated in place from the gradient g.
inline void adam_update_(at::Tensor& m, at::Tensor& v, at::Tensor& w, const at::Tensor& g, const AdamHyper& h) {
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  m.mul_(py_number(h.beta1)).add_(g, 1.0 - h.beta1);
  v.mul_(py_number(h.beta2)).addcmul_(g, g, 1.0 - h.beta2);
  at::Tensor m_hat = m * cuda_reciprocal(bc1);  // `m / bc1` as CUDA computes it
  at::Tensor v_hat = v * cuda_reciprocal(bc2);
  w.add_(m_hat.div(v_hat.sqrt().add(py_number(h.eps))).mul(py_number(-h.lr)));
}

}  // namespace pkb::blocks
