// RMSNorm over a hidden dimension sharded across tensor-parallel ranks: each
// rank holds N of the N*W hidden features, so the per-row sums of squares are
// all-reduced (fp32) before normalising. Same ATen ops in the same order as
// published: on CUDA `sum / (N*W)` is a multiply by fl32(1/(N*W)) and rsqrt is
// rsqrtf (catalog §18).
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{18, "tp_rms_norm", "RMSNorm over a TP-sharded hidden dimension", "Tensor Parallel",
                             "TP-sharded RMSNorm (QK-norm / norms over TP-sharded hidden states)", "any"};

class TpRmsNorm : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Main branch of the published repository (authoritative per the catalog):
  // hidden (M, N), a per-rank weight (N,), eps 1e-5. RNG order: hidden, weight.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    return {{"local_hidden_states", at::randn({req.m, req.n}, opts)}, {"local_weight", at::randn({req.n}, opts)},
            {"variance_epsilon", 1e-5}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [hidden, weight] = in.tensors<2>();
    const double eps = in.real(2);
    const int64_t global_hidden = hidden.size(-1) * comm.world_size();
    at::Tensor x = hidden.to(at::kFloat);
    at::Tensor sum_sq = x.pow(2).sum(-1, /*keepdim=*/true);
    comm.all_reduce(sum_sq, pkb::ReduceOp::kSum);
    at::Tensor variance = sum_sq / global_hidden;
    at::Tensor y = (x * at::rsqrt(variance + eps)).to(hidden.scalar_type());
    return {weight * y};
  }

  // One all-reduce of M fp32 row sums (bandwidth-optimal 2(W-1)/W of the bytes
  // each way); HBM: hidden and weight read, the output written; ~5 flops per element.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& h = in.tensor(0);
    const double rows = static_cast<double>(h.numel() / h.size(-1)), n = static_cast<double>(h.size(-1));
    const double e = static_cast<double>(h.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/2.0 * (w - 1) / w * rows * 4.0,
            /*hbm_bytes_per_rank=*/2.0 * rows * n * e + n * e,
            /*flops_per_rank=*/5.0 * rows * n};
  }
};

}  // namespace

PKB_PROBLEM(TpRmsNorm)
