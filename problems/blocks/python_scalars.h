// Scalars as the published PyTorch code passes them to tensor ops, for the
// references that must round as CUDA does (Adam: 40-43, 47, 48).
#pragma once

#include <ATen/ATen.h>

namespace pkb::blocks {

// NOTE [python numbers]
// A Python number as PyTorch passes it to a tensor op: a 0-dim double CPU
// tensor marked as a wrapped number (no type promotion; on CUDA a CPU scalar
// read in the op's float32 math). The C++ Scalar overloads are not always the
// same op: on the CPU, bf16 `mul_(Scalar)` rounds the scalar to bf16 first
// (measured: x.mul_(0.2) then differs from x * fl32(0.2) in ~20 % of elements),
// while the published `flat_grad.div_(world_size)`, `m.mul_(beta1)`,
// `v_hat.sqrt().add(eps)` pass a wrapped number.
inline at::Tensor py_number(double v) {
  at::Tensor t = at::scalar_tensor(v, at::TensorOptions().dtype(at::kDouble));
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// `tensor / Python number` on CUDA is a multiply by 1.0f / float(s).
inline at::Tensor cuda_reciprocal(double s) { return py_number(static_cast<double>(1.0f / static_cast<float>(s))); }

}  // namespace pkb::blocks
