// One data-parallel training step of a 2-layer ReLU MLP with MSE loss and
// Adam (a hand-written PyTorch DDP step, catalog §40): parameters and both
// Adam moments are flattened and broadcast from rank 0, forward and backward
// run with autograd on the local batch, the flat gradient is all-reduced
// (bf16 SUM) and averaged, and every rank applies the same Adam update.
// Nothing is modified in place: the flat buffers are new and the returned
// parameters and moments are views of them. Rounding order as published (bf16
// after every op, autograd's own backward ops; NOTE [python numbers],
// blocks/python_scalars.h). The MLP and the Adam step are the blocks 40-42
// share (blocks/mlp_step.h, blocks/adam.h).
#include "../blocks/adam.h"
#include "../blocks/mlp_step.h"
#include "../blocks/shared_seed_draw.h"
#include "pkb/integrity.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{40, "ddp", "One DDP training step of a 2-layer MLP with Adam", "Data Parallel",
                             "hand-written PyTorch DDP step (broadcast from rank 0 + averaged gradients) with Adam",
                             "any"};

using namespace pkb::blocks;

class Ddp : public pkb::ProblemWithSpec<kSpec, SharedSeedDraw> {
 public:
  // perturb_mlp_for_integrity (blocks/mlp_step.h): the first moments are
  // arguments 6-9, the second 10-13.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = SharedSeedDraw::make_integrity_inputs(req);
    perturb_mlp_for_integrity(in, req, 6, 10, 14);
    return in;
  }

  // Seeded with the rank term 0 on every rank; the MLP of mlp_dims drawn as
  // add_mlp_batch_and_params; Adam moments zeros.
  pkb::Inputs draw(const pkb::InputRequest& req, uint64_t seed) const override {
    at::manual_seed(seed);
    auto opts = req.options();
    const MlpDims d = mlp_dims(req, false);
    pkb::Inputs in;
    add_mlp_batch_and_params(in, req, d);
    const char* names[kMlpParams] = {"W1", "b1", "W2", "b2"};
    for (int i = 0; i < kMlpParams; ++i) in.add(std::string("exp_avg_") + names[i], at::zeros(mlp_param_shape(d, i), opts));
    for (int i = 0; i < kMlpParams; ++i)
      in.add(std::string("exp_avg_sq_") + names[i], at::zeros(mlp_param_shape(d, i), opts));
    add_adam_hyper(in, req.trial);
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    std::vector<at::Tensor> p0, m0, v0;
    for (int i = 0; i < kMlpParams; ++i) {
      p0.push_back(in.tensor(2 + i));
      m0.push_back(in.tensor(2 + kMlpParams + i));
      v0.push_back(in.tensor(2 + 2 * kMlpParams + i));
    }
    const AdamHyper hp = adam_hyper(in, 14);
    const int64_t w = comm.world_size();

    at::Tensor flat_p = flatten(p0);
    comm.broadcast(flat_p, 0);
    std::vector<at::Tensor> pv = unflatten(flat_p, p0);  // the updated parameters (views)
    std::vector<at::Tensor> params = requiring_grad(pv);
    at::Tensor flat_m = flatten(m0);
    comm.broadcast(flat_m, 0);
    std::vector<at::Tensor> m = unflatten(flat_m, m0);
    at::Tensor flat_v = flatten(v0);
    comm.broadcast(flat_v, 0);
    std::vector<at::Tensor> v = unflatten(flat_v, v0);

    std::vector<at::Tensor> grads = mlp_grads(in.tensor(0), in.tensor(1), params);
    at::Tensor flat_g = flatten(grads);
    comm.all_reduce(flat_g, pkb::ReduceOp::kSum);
    flat_g.mul_(cuda_reciprocal(static_cast<double>(w)));  // `div_(world_size)` as CUDA computes it
    std::vector<at::Tensor> g = unflatten(flat_g, grads);
    // `p.data.add_`: the parameter's storage.
    for (int i = 0; i < kMlpParams; ++i) adam_update_(m[i], v[i], pv[i], g[i], hp);
    pkb::Outputs outs(pv.begin(), pv.end());
    outs.insert(outs.end(), m.begin(), m.end());
    outs.insert(outs.end(), v.begin(), v.end());
    return outs;
  }

  // P parameters of e bytes, a local batch of c rows: NVLink three broadcasts
  // of P·e (the root sends, the others receive P·e each) + a bandwidth-optimal
  // all-reduce 2(W-1)/W·P·e; HBM ~ 20·P·e (flatten/broadcast/Adam passes over
  // parameters, moments and gradients) + the batch read; FLOPs 6·c·(d_in·hidden +
  // hidden·d_out) (forward + backward GEMMs) + ~15·P (Adam).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const MlpCostTerms t = mlp_cost_terms(in);
    const double p = t.p, e = t.e, w = world;
    return {/*nvlink_bytes_per_rank=*/3.0 * p * e + 2.0 * (w - 1) / w * p * e,
            /*hbm_bytes_per_rank=*/20.0 * p * e + t.batch_bytes,
            /*flops_per_rank=*/t.gemm_flops + 15.0 * p};
  }
};

}  // namespace

PKB_PROBLEM(Ddp)
