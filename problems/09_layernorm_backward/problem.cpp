// LayerNorm weight and bias gradients under sequence parallelism: each rank
// holds different token rows, so the per-rank column sums are all-reduced.
// Rounding order matters (catalog §9): the local partials are rounded to bf16
// before the bf16 all-reduce, d_beta is reduced before d_gamma, and the tuple
// is returned as (d_gamma, d_beta).
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{9, "layernorm_backward",
                             "LayerNorm weight/bias gradients all-reduced across sequence shards", "Sequence Parallel",
                             "Megatron-LM (LayerNorm grads under sequence parallelism)", "any"};

class LayerNormBackward : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published: X's randn, then dY's randn. X is normalised row-wise
  // in bf16 ops (norm with fp32 accumulation, + 1e-5, division).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    at::Tensor x = at::randn({req.m, req.n}, opts);
    at::Tensor x_hat = x / (x.norm(2, {1}, /*keepdim=*/true) + 1e-5);
    at::Tensor dy = at::randn({req.m, req.n}, opts);
    return {{"X_hat", x_hat}, {"dY", dy}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [x_hat, dy] = in.tensors<2>();
    at::Tensor d_beta = dy.sum(0);
    at::Tensor d_gamma = (dy * x_hat).sum(0);
    comm.all_reduce(d_beta, pkb::ReduceOp::kSum);
    comm.all_reduce(d_gamma, pkb::ReduceOp::kSum);
    return {d_gamma, d_beta};
  }

  // Two all-reduces of N elements (bandwidth-optimal: 2(W-1)/W of the bytes
  // each way); the inputs are read once; ~3MN flops (product and two sums).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& dy = in.tensor(1);
    const double m = static_cast<double>(dy.size(0)), n = static_cast<double>(dy.size(1));
    const double e = static_cast<double>(dy.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/2.0 * 2.0 * (w - 1) / w * n * e,
            /*hbm_bytes_per_rank=*/2.0 * m * n * e + 2.0 * n * e,
            /*flops_per_rank=*/3.0 * m * n};
  }
};

}  // namespace

PKB_PROBLEM(LayerNormBackward)
