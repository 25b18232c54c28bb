// One FSDP (ZeRO-3-style flat parameter) training step of a two-layer MLP:
// all-gather the flat bf16 parameter shards, split them into W1, b1, W2, b2,
// forward (linear, relu, linear, mean squared error), backward, flatten the
// gradients in the same order, reduce-scatter them (sum, then / W) and apply a
// sharded Adam update with decoupled weight decay on the original shard.
//
// ATen has no autograd engine, so the backward pass is written out with the
// ops autograd runs for F.linear (addmm), relu and mse_loss, on the same
// dtypes: mse_loss_backward with a bf16 grad of ones, then for each addmm the
// bias grad as a sum over rows, the weight grad as grad^T · input (the form
// PyTorch picks for a transposed weight operand) and the input grad as
// grad · weight, and threshold_backward on relu's output.
//
// Quirk reproduced (the published harness): only rank 0 draws non-zero
// parameters; every other rank's W1, b1, W2, b2 are zeros before flattening,
// so the gathered vector is rank 0's first P/W entries followed by zeros.
//
// Python-scalar divisions on CUDA are a multiplication by the fp32 reciprocal
// (`div_(world_size)`, `m / bc1`, `v / bc2`); pkb computes them that way on
// every device.
#include <cmath>

#include "../blocks/round_up.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{47, "fsdp_step_e2e",
                             "One FSDP training step of a 2-layer MLP: all-gather flat params, forward+backward, "
                             "reduce-scatter grads, sharded AdamW update",
                             "FSDP/ZeRO", "unknown (PyTorch FSDP / ZeRO-3-style flat-parameter sharding)", "any"};

struct MlpShapes {
  int64_t d_in, hidden, d_out;
  int64_t numel() const { return hidden * d_in + hidden + d_out * hidden + d_out; }
};

// As published: hidden grows until the parameter count divides the world size.
MlpShapes mlp_shapes(int64_t n, int64_t world) {
  MlpShapes s{std::max<int64_t>(16, std::min<int64_t>(n, 256)), std::max<int64_t>(32, std::min<int64_t>(n / 2, 512)),
              std::max<int64_t>(8, std::min<int64_t>(n / 4, 256))};
  for (int i = 0; i < 1024; ++i, ++s.hidden)
    if (s.numel() % world == 0) return s;
  PKB_CHECK(false, "could not align the MLP parameter count with world size ", world);
}

using pkb::blocks::round_up;

// `t / s` for a Python float s as CUDA computes it: t * fl32(1 / fl32(s)).
double cuda_reciprocal(double s) { return static_cast<double>(1.0f / static_cast<float>(s)); }

class FsdpStepE2e : public pkb::ProblemWithSpec<kSpec> {
 public:
  // seed(47, 0, trial) on every rank: full_X, full_y, then (rank 0 only) W1,
  // b1, W2, b2 randn; the other ranks' parameters are zeros.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    const int64_t world = req.world, rank = req.rank;
    const int64_t n_total = round_up(std::max<int64_t>(req.m, world), world), chunk = n_total / world;
    const MlpShapes s = mlp_shapes(req.n, world);
    const int64_t part = s.numel() / world;
    at::Tensor full_x = at::randn({n_total, s.d_in}, opts);
    at::Tensor full_y = at::randn({n_total, s.d_out}, opts);
    auto param = [&](at::IntArrayRef shape) { return rank == 0 ? at::randn(shape, opts) : at::zeros(shape, opts); };
    at::Tensor w1 = param({s.hidden, s.d_in}), b1 = param({s.hidden});
    at::Tensor w2 = param({s.d_out, s.hidden}), b2 = param({s.d_out});
    at::Tensor full = at::cat({w1.reshape(-1), b1.reshape(-1), w2.reshape(-1), b2.reshape(-1)});

    return {{"X_local", full_x.narrow(0, rank * chunk, chunk).contiguous()},
            {"y_local", full_y.narrow(0, rank * chunk, chunk).contiguous()},
            {"flat_param_shard", full.narrow(0, rank * part, part).contiguous()}, {"param_shapes.0.0", s.hidden},
            {"param_shapes.0.1", s.d_in}, {"param_shapes.1.0", s.hidden}, {"param_shapes.2.0", s.d_out},
            {"param_shapes.2.1", s.hidden}, {"param_shapes.3.0", s.d_out}, {"exp_avg_shard", at::zeros({part}, opts)},
            {"exp_avg_sq_shard", at::zeros({part}, opts)}, {"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999},
            {"eps", 1e-8}, {"weight_decay", 0.01}, {"step", static_cast<int64_t>(1 + req.trial % 7)}};
  }

  // NOTE [integrity trials] (pkb/integrity.h): the published step leaves
  // most outputs within the tolerance of something trivial: the shards of
  // ranks other than 0 are zeros (a candidate that never gathers them sees
  // the right parameters), the Adam moments start at zero and the gradients
  // are small (v = 0.001·g² all below the tolerance, m nearly so), and
  // lr = 1e-3 moves theta by ~1e-3 (returning the input shard passes theta).
  // Here, after the published draw (this rank's seed): every rank's shard is
  // 0.125·randn, y is scaled by 64 (both exact in bf16: the residual and so
  // the gradients grow, m and v depend on g well above the tolerance),
  // exp_avg is 0.1·randn and exp_avg_sq uniform in [0.01, 0.02), and
  // lr = 0.05 (an update of ~0.05 per element). Measured against the fp32
  // second way (W = 1, 2, 4, 5, 8 integrity trials each), what this avoids:
  // with zero moments the first update is lr·sign(g), which flips with the
  // rounding of gradients near 0 (3 of 5168 elements 1.9 off), and with
  // full-size randn shards the activations are ~60 and the bf16
  // reduce-scatter of the gradients is off by more than the tolerance of m
  // at W = 4 and 5.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = make_inputs(req);
    const at::Tensor& shard = in.tensor(2);
    in.args()[1].value = in.tensor(1) * 64.0;
    in.args()[2].value = at::randn(shard.sizes(), shard.options()) * 0.125;
    in.args()[9].value = at::randn(shard.sizes(), shard.options()) * 0.1;
    in.args()[10].value = (at::rand(shard.sizes(), shard.options()) + 1.0) * 0.01;
    in.args()[11].value = 0.05;
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& x = in.tensor(0);
    const at::Tensor& y = in.tensor(1);
    const at::Tensor& shard = in.tensor(2);
    const int64_t hidden = in.integer(3), d_in = in.integer(4), d_out = in.integer(6);
    PKB_CHECK(in.integer(5) == hidden && in.integer(7) == hidden && in.integer(8) == d_out,
              "param_shapes must be ((hidden, d_in), (hidden,), (d_out, hidden), (d_out,))");
    const at::Tensor& exp_avg = in.tensor(9);
    const at::Tensor& exp_avg_sq = in.tensor(10);
    const double lr = in.real(11), beta1 = in.real(12), beta2 = in.real(13), eps = in.real(14);
    const double weight_decay = in.real(15);
    const int64_t step = in.integer(16);
    PKB_CHECK(step >= 1, "step must be at least 1");
    const int world = comm.world_size();
    const int64_t p = shard.numel();
    PKB_CHECK(p * world == hidden * d_in + hidden + d_out * hidden + d_out,
              "W x shard size must equal the parameter count of param_shapes");

    // 1-2. Gather the flat parameters and view them as the four tensors.
    at::Tensor full = at::empty({world * p}, shard.options());
    comm.all_gather_into_tensor(full, shard.contiguous());
    int64_t off = 0;
    auto take = [&](at::IntArrayRef shape) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      at::Tensor t = full.narrow(0, off, n).view(shape);
      off += n;
      return t;
    };
    at::Tensor w1 = take({hidden, d_in}), b1 = take({hidden}), w2 = take({d_out, hidden}), b2 = take({d_out});

    // 3. Forward: F.linear (addmm), relu, F.linear, mse_loss (mean).
    at::Tensor h = at::relu(at::addmm(b1, x, w1.t()));
    at::Tensor out = at::addmm(b2, h, w2.t());

    // 4. Backward, as autograd runs it (loss.backward() seeds a bf16 one).
    at::Tensor g_out = at::mse_loss_backward(at::ones({}, out.options()), out, y, at::Reduction::Mean);
    at::Tensor g_b2 = g_out.sum(0);
    at::Tensor g_w2 = g_out.t().mm(h);
    at::Tensor g_h = g_out.mm(w2);
    at::Tensor g_pre = at::threshold_backward(g_h, h, 0);
    at::Tensor g_b1 = g_pre.sum(0);
    at::Tensor g_w1 = g_pre.t().mm(x);

    // 5. Flatten in parameter order, reduce-scatter, divide by W.
    at::Tensor flat_g = at::cat({g_w1.reshape(-1), g_b1.reshape(-1), g_w2.reshape(-1), g_b2.reshape(-1)});
    at::Tensor g = at::empty({p}, flat_g.options());
    comm.reduce_scatter_tensor(g, flat_g.contiguous(), pkb::ReduceOp::kSum);
    g.mul_(cuda_reciprocal(world));

    // 6. Adam on the shard, decay applied to the original shard afterwards.
    at::Tensor m = exp_avg.clone();
    at::Tensor v = exp_avg_sq.clone();
    at::Tensor theta = shard.clone();
    m.mul_(beta1).add_(g, 1.0 - beta1);
    v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
    const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    at::Tensor m_hat = m * cuda_reciprocal(bc1);
    at::Tensor v_hat = v * cuda_reciprocal(bc2);
    at::Tensor denom = v_hat.sqrt().add(eps);
    theta.add_(m_hat.div(denom), -lr);
    theta.add_(shard, -lr * weight_decay);
    return {theta, m, v};
  }

  // Per rank, e = element size, P = parameter count, p = P/W, c = local rows:
  // NVLink (W-1)·p·e received by the all-gather + (W-1)·p·e sent by the
  // reduce-scatter; HBM: gathered params written and read (2Pe), X and y read,
  // h and out written and read (2c·(hidden+d_out)·e), grads written and read
  // (2Pe), Adam reads shard/m/v/g and writes theta/m/v (7pe); FLOPs: forward
  // 2c·(d_in·hidden + hidden·d_out), backward twice that (input and weight
  // grads; the first layer's input grad is not needed, counted anyway as an
  // upper bound), plus ~15 per shard element for Adam.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& x = in.tensor(0);
    const double e = static_cast<double>(x.element_size()), w = world;
    const double c = static_cast<double>(x.size(0)), d_in = static_cast<double>(x.size(1));
    const double hidden = static_cast<double>(in.integer(3)), d_out = static_cast<double>(in.integer(6));
    const double p = static_cast<double>(in.tensor(2).numel()), total = p * w;
    return {
        /*nvlink_bytes_per_rank=*/2.0 * (w - 1) * p * e,
        /*hbm_bytes_per_rank=*/4.0 * total * e + c * (d_in + d_out) * e + 2.0 * c * (hidden + d_out) * e + 7.0 * p * e,
        /*flops_per_rank=*/6.0 * c * (d_in * hidden + hidden * d_out) + 15.0 * p};
  }
};

}  // namespace

PKB_PROBLEM(FsdpStepE2e)
