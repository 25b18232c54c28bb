// A ZeRO step (DeepSpeed stages 1 and 2: 41, 42) of the MLP of mlp_step.h:
// the flat parameters are broadcast from rank 0 and replicated, the flat
// gradient is reduced into this rank's contiguous slice of the flat parameter
// index (a slice that crosses parameter boundaries) and averaged, Adam
// updates that slice with the moment shards, and the updated slices are
// all-gathered back into full parameters. The stages differ only in how the
// gradient shard is reduced (grad_shard) and in its traffic (cost). No input
// is modified (the moments are cloned, the flat buffers are new).
#pragma once

#include "../blocks/adam.h"
#include "../blocks/mlp_step.h"
#include "pkb/integrity.h"
#include "pkb/problem.h"

namespace pkb::blocks {

// P parameters of e bytes, a local batch of c rows: NVLink a broadcast of
// P·e, the gradient's 2(W-1)/W·P·e (a reduce-scatter and the parameter
// all-gather; with `all_reduce`, an all-reduce and then the all-gather's
// (W-1)/W·P·e more); HBM ~ 10·P·e (flatten, broadcast, gradient and gather
// passes) + ~8·P/W·e (the sharded Adam) + the batch; FLOPs
// 6·c·(d_in·hidden + hidden·d_out) + ~15·P/W.
inline Cost zero_step_cost(int world, const Inputs& in, bool all_reduce) {
  const MlpCostTerms t = mlp_cost_terms(in);
  const double p = t.p, e = t.e, w = world;
  return {/*nvlink_bytes_per_rank=*/p * e + 2.0 * (w - 1) / w * p * e + (all_reduce ? (w - 1) / w * p * e : 0.0),
          /*hbm_bytes_per_rank=*/10.0 * p * e + 8.0 * p / w * e + t.batch_bytes,
          /*flops_per_rank=*/t.gemm_flops + 15.0 * p / w};
}

class ZeroMlpStep : public Problem {
 public:
  // The published builder grows `hidden` from its default until the flat
  // parameter count hidden·(d_in + 1 + d_out) + d_out is divisible by W; at
  // N >= 1024 that count is 513·hidden + 256 with 513 = 3³·19, impossible when
  // 3 | W or 19 | W. Other N can exclude other W: make_inputs checks.
  std::string check_world(int world) const override {
    if (world < 1) return "world size must be at least 1";
    if (world % 3 == 0 || world % 19 == 0)
      return "no MLP width makes the flat parameter count divisible by W when 3 or 19 divides W";
    return "";
  }

  // Seeded with the rank term 0 on every rank; the MLP of mlp_dims (hidden
  // aligned: the flat parameter count P divisible by W) drawn as
  // add_mlp_batch_and_params; moment shards zeros (P/W,).
  Inputs make_inputs(const InputRequest& req) const override { return draw(req, seed_for(spec().id, 0, req.trial)); }

  // perturb_mlp_for_integrity (mlp_step.h): the moment shards are arguments 6
  // and 7.
  Inputs make_integrity_inputs(const InputRequest& req) const override {
    Inputs in = draw(req, integrity_shared_seed(req));
    perturb_mlp_for_integrity(in, req, 6, 7, 8);
    return in;
  }

  Outputs reference(Context& ctx, Collectives& comm, const Inputs& in) const override {
    std::vector<at::Tensor> templates;
    for (int i = 0; i < kMlpParams; ++i) templates.push_back(in.tensor(2 + i));
    const AdamHyper hp = adam_hyper(in, 8);
    const int64_t w = comm.world_size(), rank = comm.rank();

    at::Tensor flat_p = flatten(templates);
    comm.broadcast(flat_p, 0);
    std::vector<at::Tensor> params = requiring_grad(unflatten(flat_p, templates));
    const int64_t part = in.tensor(6).numel();
    PKB_CHECK(flat_p.numel() == part * w, "flat parameter count ", flat_p.numel(), " is not W x ", part);
    at::Tensor m_part = in.tensor(6).clone();
    at::Tensor v_part = in.tensor(7).clone();

    at::Tensor g_part = grad_shard(comm, flatten(mlp_grads(in.tensor(0), in.tensor(1), params)), rank * part, part);
    at::Tensor w_part = flat_p.narrow(0, rank * part, part).clone();
    adam_update_(m_part, v_part, w_part, g_part, hp);

    at::Tensor gathered = at::empty_like(flat_p);
    comm.all_gather_into_tensor(gathered, w_part.contiguous());
    flat_p.copy_(gathered);
    Outputs outs;
    for (const auto& t : unflatten(flat_p, templates)) outs.push_back(t);
    outs.push_back(m_part);
    outs.push_back(v_part);
    return outs;
  }

 protected:
  // The averaged gradient's elements [offset, offset + part) of this rank,
  // from its flat gradient.
  virtual at::Tensor grad_shard(Collectives& comm, at::Tensor flat_g, int64_t offset, int64_t part) const = 0;

 private:
  // The published draw with `seed` in place of seed_for(id, 0, trial).
  Inputs draw(const InputRequest& req, uint64_t seed) const {
    at::manual_seed(seed);
    auto opts = req.options();
    const MlpDims d = mlp_dims(req, true);
    Inputs in;
    add_mlp_batch_and_params(in, req, d);
    in.add("exp_avg_part", at::zeros({d.params() / req.world}, opts));
    in.add("exp_avg_sq_part", at::zeros({d.params() / req.world}, opts));
    add_adam_hyper(in, req.trial);
    return in;
  }
};

}  // namespace pkb::blocks
