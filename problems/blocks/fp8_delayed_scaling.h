// FP8 (e4m3) round trip under delayed scaling, Transformer Engine style (52,
// 53): a rolling 16-entry amax history, scale = max(history) / 448. Rounding
// points follow the published reference: the amax is exact, the history
// bf16, the scale fp32, the quantisation a true fp32 division by a 0-d tensor
// cast to e4m3 (round to nearest even). `/ 448.0` on CUDA is a multiplication
// by the fp32 reciprocal, reproduced here so CPU replay matches.
#pragma once

#include <algorithm>
#include <utility>

#include "pkb/problem.h"

namespace pkb::blocks {

inline constexpr float kFp8Max = 448.0f;
inline constexpr int64_t kAmaxHistory = 16;

// The published flat tensor's elements per rank at base shape (m, n).
inline int64_t fp8_shard_elems(int64_t m) { return std::max<int64_t>(64, std::min<int64_t>(64 * m, 4096)); }

// The published amax history: a bf16 constant, the same on every rank.
inline at::Tensor initial_amax_history(const InputRequest& req) {
  return at::full({kAmaxHistory}, 1e-8, req.options(at::kBFloat16));
}

// Returns (x's reconstruction in its own dtype, the updated history).
inline std::pair<at::Tensor, at::Tensor> fp8_round_trip(const at::Tensor& x, const at::Tensor& history) {
  at::Tensor cur_abs_max = x.abs().max().to(at::kFloat);
  at::Tensor hist = at::roll(history, {-1}, {0});
  hist.select(0, hist.size(0) - 1).copy_(cur_abs_max);  // `out[-1] = cur.to(out.dtype)`
  at::Tensor scale = at::clamp_min(hist.max(), 1e-12).to(at::kFloat) * static_cast<double>(1.0f / kFp8Max);
  at::Tensor q = (x.to(at::kFloat) / scale).to(at::kFloat8_e4m3fn);
  return {(q.to(at::kFloat) * scale).to(x.scalar_type()), hist};
}

}  // namespace pkb::blocks
