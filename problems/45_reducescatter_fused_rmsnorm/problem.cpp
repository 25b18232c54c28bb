// Reduce-scatter of a flat partial-sum buffer (bf16 SUM), average over the
// ranks, then RMSNorm of this rank's row block in fp32 (the "reduce-scatter +
// RMSNorm" fusion of sequence-parallel transformers, catalog §45). Rounding
// order as published: bf16 sum, bf16 division by W, then fp32
// x · rsqrt(mean(x²) + eps) · gamma, rounded once to bf16.
#include "pkb/integrity.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{
    45,
    "reducescatter_fused_rmsnorm",
    "Reduce-scatter of partial sums, average, then RMSNorm of the local rows",
    "Tensor Parallel",
    "Megatron-LM sequence parallel / TensorRT-LLM reduce-scatter + RMSNorm fusion (not stated)",
    "any"};

class ReduceScatterFusedRmsNorm : public pkb::ProblemWithSpec<kSpec> {
 public:
  // hidden = max(32, min(N, 128)), rows = max(2, max(M, W) / max(W, 4)).
  // gamma first, seeded with the rank term 0 (identical on every rank); then a
  // re-seed with this rank's seed for the (rows·hidden·W,) partial sums.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    return draw(req, pkb::seed_for(spec().id, 0, req.trial), pkb::seed_for(spec().id, req.rank, req.trial));
  }

  // NOTE [integrity trials] (pkb/integrity.h): the published draw under
  // seeds that every integrity draw changes, the refresh in place included
  // (re-seeding from req.trial, as published, gives the refresh the last
  // trial's values again: a cache keyed on pointers passed). gamma's seed
  // is still shared by every rank.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    return draw(req, pkb::integrity_shared_seed(req), req.seed);
  }

  // The published draw: gamma from `shared_seed`, the partial sums from `rank_seed`.
  pkb::Inputs draw(const pkb::InputRequest& req, uint64_t shared_seed, uint64_t rank_seed) const {
    auto opts = req.options();
    const int64_t w = req.world;
    const int64_t hidden = std::max<int64_t>(32, std::min<int64_t>(req.n, 128));
    const int64_t rows = std::max<int64_t>(2, std::max<int64_t>(req.m, w) / std::max<int64_t>(w, 4));
    at::manual_seed(shared_seed);
    at::Tensor gamma = at::randn({hidden}, opts);
    at::manual_seed(rank_seed);
    at::Tensor rs_input = at::randn({rows * hidden * w}, opts);
    return {{"rs_input_1d", rs_input}, {"gamma", gamma}, {"eps", 1e-5}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [rs_input, gamma] = in.tensors<2>();
    const double eps = in.real(2);
    const int64_t w = comm.world_size();
    const int64_t chunk = rs_input.numel() / w, hidden = gamma.numel();
    PKB_CHECK(chunk % hidden == 0, "chunk (", chunk, ") must be a multiple of hidden (", hidden, ")");
    at::Tensor out_flat = at::empty({chunk}, rs_input.options());
    comm.reduce_scatter_tensor(out_flat, rs_input.contiguous(), pkb::ReduceOp::kSum);
    // `div_(world_size)`: on CUDA a bf16 tensor divided by a Python int is a
    // multiply by fl32(1/W); spelled out so the CPU computes the same, with
    // the factor passed as PyTorch passes a Python number (a wrapped 0-dim
    // double tensor: the C++ Scalar overload of bf16 `mul_` rounds the factor
    // to bf16 on the CPU, measured).
    at::Tensor inv_w = at::scalar_tensor(static_cast<double>(1.0f / static_cast<float>(w)), at::TensorOptions().dtype(at::kDouble));
    inv_w.unsafeGetTensorImpl()->set_wrapped_number(true);
    out_flat.mul_(inv_w);
    at::Tensor x = out_flat.view({chunk / hidden, hidden}).to(at::kFloat);
    at::Tensor gn = gamma.to(at::kFloat);
    at::Tensor rms = at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true).add(eps));
    at::Tensor y = x * rms * gn;
    return {y.to(rs_input.scalar_type())};
  }

  // With the chunk c = rows·hidden elements of e bytes: NVLink (W-1)·c·e
  // (a ring reduce-scatter sends and receives W-1 chunks); HBM W·c·e read,
  // c·e written (+ gamma); FLOPs (W-1)·c adds + ~6·c for the average and norm.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& x = in.tensor(0);
    const double w = world, e = static_cast<double>(x.element_size());
    const double chunk = static_cast<double>(x.numel()) / w, hidden = static_cast<double>(in.tensor(1).numel());
    return {/*nvlink_bytes_per_rank=*/(w - 1) * chunk * e,
            /*hbm_bytes_per_rank=*/(w * chunk + chunk + hidden) * e,
            /*flops_per_rank=*/(w - 1) * chunk + 6.0 * chunk};
  }
};

}  // namespace

PKB_PROBLEM(ReduceScatterFusedRmsNorm)
