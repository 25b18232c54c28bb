// ZeRO-2 training step of a 2-layer ReLU MLP with MSE loss (DeepSpeed ZeRO
// stage 2, catalog §42): as problem 41, except that the flat gradient is
// reduce-scattered (bf16 SUM) straight into this rank's shard and averaged
// there; the full averaged gradient is never formed. The Adam moments and the
// update cover only this rank's contiguous slice of the flat parameter index
// (a slice that crosses parameter boundaries); the updated slices are
// all-gathered back into full parameters. No input is
// modified (the moments are cloned, the flat buffers are new). Rounding order
// as published; `tensor / Python number` is a multiply by the fp32
// reciprocal on CUDA and is spelled out that way.
#include "pkb/integrity.h"
#include "pkb/problem.h"

#include <cmath>

namespace {

constexpr int kParams = 4;  // W1, b1, W2, b2

at::Tensor flatten(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  for (const auto& t : ts) flat.push_back(t.contiguous().view(-1));
  return at::cat(flat);
}

std::vector<at::Tensor> unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& like) {
  std::vector<at::Tensor> out;
  int64_t off = 0;
  for (const auto& t : like) {
    out.push_back(flat.narrow(0, off, t.numel()).view(t.sizes()));
    off += t.numel();
  }
  return out;
}

// A Python number as PyTorch passes it to a tensor op: a 0-dim double CPU
// tensor marked as a wrapped number (no type promotion; on CUDA a CPU scalar
// read in the op's float32 math). The C++ Scalar overloads are not always the
// same op: on the CPU, bf16 `mul_(Scalar)` rounds the scalar to bf16 first
// (measured: x.mul_(0.2) then differs from x * fl32(0.2) in ~20 % of elements),
// while the published `flat_grad.div_(world_size)`, `m_buf.mul_(beta1)` pass a
// wrapped number.
at::Tensor py_number(double v) {
  at::Tensor t = at::scalar_tensor(v, at::TensorOptions().dtype(at::kDouble));
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// `tensor / Python number` on CUDA is a multiply by 1.0f / float(s).
at::Tensor cuda_reciprocal(double s) { return py_number(static_cast<double>(1.0f / static_cast<float>(s))); }

class Zero2OptimizerShardGrad : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{42, "zero2_optimizer_shard_grad",
                                    "ZeRO-2 step: gradient reduce-scatter, Adam on a flat-index shard, parameter all-gather",
                                    "FSDP/ZeRO", "DeepSpeed ZeRO stage 2 (not stated)", "W not divisible by 3 or 19"};
    return s;
  }

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

  // Seeded with the rank term 0 on every rank. n_total = roundup(max(M, W), W),
  // chunk = n_total/W, d_in = max(16, min(N, 256)), d_out = max(8, min(N/4,
  // 256)), hidden = the first value from max(32, min(N/2, 512)) up (1024 tries)
  // that makes the flat parameter count P divisible by W. RNG order: full_X,
  // full_y, then on rank 0 only W1, b1, W2, b2 (zeros elsewhere); moment
  // shards zeros (P/W,).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    return draw(req, pkb::seed_for(spec().id, 0, req.trial));
  }

  // NOTE [integrity trials] (pkb/integrity.h): the published draw under a
  // seed that every rank shares and every integrity draw changes, the refresh
  // in place included (re-seeding from req.trial, as published, gives the
  // refresh the last trial's values again: a cache keyed on pointers passed).
  // The published step leaves the update (lr·(±1) = 1e-3) and v = 0.001·g²
  // below the tolerance (measured: an answer that skips the parameter update
  // passed both published trials of 40). Here, after that draw and from this
  // rank's seed, every rank's parameters are 0.125·randn (rank 0's are
  // broadcast, the others' must be ignored), y is scaled by 64 (exact:
  // larger gradients), the moments are 0.1·randn and uniform in [0.01, 0.02)
  // (sqrt(v) above |m|, as Adam's own) and lr = 0.05, as for problem 47
  // (which measured why not full-size parameters or zero moments).
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = draw(req, pkb::integrity_shared_seed(req));
    at::manual_seed(req.seed);
    auto randn_like = [](const at::Tensor& t) { return at::randn(t.sizes(), t.options()); };
    in.args()[1].value = in.tensor(1) * 64.0;
    for (int i = 2; i < 6; ++i) in.args()[i].value = randn_like(in.tensor(i)) * 0.125;
    for (int i = 6; i < 7; ++i) in.args()[i].value = randn_like(in.tensor(i)) * 0.1;
    for (int i = 7; i < 8; ++i)
      in.args()[i].value = (at::rand(in.tensor(i).sizes(), in.tensor(i).options()) + 1.0) * 0.01;
    in.args()[8].value = 0.05;
    return in;
  }

  // The published draw with `seed` in place of seed_for(id, 0, trial).
  pkb::Inputs draw(const pkb::InputRequest& req, uint64_t seed) const {
    at::manual_seed(seed);
    auto opts = at::TensorOptions().dtype(req.dtype).device(req.device);
    const int64_t w = req.world, n = req.n;
    const int64_t n_total = (std::max<int64_t>(req.m, w) + w - 1) / w * w, chunk = n_total / w;
    const int64_t d_in = std::max<int64_t>(16, std::min<int64_t>(n, 256));
    const int64_t d_out = std::max<int64_t>(8, std::min<int64_t>(n / 4, 256));
    int64_t hidden = std::max<int64_t>(32, std::min<int64_t>(n / 2, 512));
    bool aligned = false;
    for (int i = 0; i < 1024 && !aligned; ++i) {
      if ((hidden * d_in + hidden + d_out * hidden + d_out) % w == 0) aligned = true;
      else ++hidden;
    }
    PKB_CHECK(aligned, "could not align the MLP parameter count with W = ", w, " (N = ", n, ")");
    const int64_t part = (hidden * d_in + hidden + d_out * hidden + d_out) / w;
    at::Tensor full_x = at::randn({n_total, d_in}, opts);
    at::Tensor full_y = at::randn({n_total, d_out}, opts);
    const std::vector<std::vector<int64_t>> shapes{{hidden, d_in}, {hidden}, {d_out, hidden}, {d_out}};
    const char* names[kParams] = {"W1", "b1", "W2", "b2"};
    pkb::Inputs in;
    in.add("X_local", full_x.narrow(0, req.rank * chunk, chunk).contiguous());
    in.add("y_local", full_y.narrow(0, req.rank * chunk, chunk).contiguous());
    for (int i = 0; i < kParams; ++i)
      in.add(names[i], req.rank == 0 ? at::randn(shapes[i], opts) : at::zeros(shapes[i], opts));
    in.add("exp_avg_part", at::zeros({part}, opts));
    in.add("exp_avg_sq_part", at::zeros({part}, opts));
    in.add("lr", 1e-3);
    in.add("beta1", 0.9);
    in.add("beta2", 0.999);
    in.add("eps", 1e-8);
    in.add("step", static_cast<int64_t>(1 + req.trial % 7));
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& x = in.tensor(0);
    const at::Tensor& y = in.tensor(1);
    std::vector<at::Tensor> templates;
    for (int i = 0; i < kParams; ++i) templates.push_back(in.tensor(2 + i));
    const double lr = in.real(8), beta1 = in.real(9), beta2 = in.real(10), eps = in.real(11);
    const int64_t step = in.integer(12);
    const int64_t w = comm.world_size(), rank = comm.rank();

    at::Tensor flat_p = flatten(templates);
    comm.broadcast(flat_p, 0);
    std::vector<at::Tensor> params;
    for (const auto& t : unflatten(flat_p, templates)) params.push_back(t.detach().requires_grad_(true));
    const int64_t part = in.tensor(6).numel();
    PKB_CHECK(flat_p.numel() == part * w, "flat parameter count ", flat_p.numel(), " is not W x ", part);
    at::Tensor m_part = in.tensor(6).clone();
    at::Tensor v_part = in.tensor(7).clone();

    at::Tensor h = at::relu(at::linear(x, params[0], params[1]));
    at::Tensor out = at::linear(h, params[2], params[3]);
    at::Tensor loss = at::mse_loss(out, y, at::Reduction::Mean);
    loss.backward();

    std::vector<at::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad());
    at::Tensor flat_g = flatten(grads).contiguous();
    at::Tensor g_part = at::empty({part}, flat_g.options());
    comm.reduce_scatter_tensor(g_part, flat_g, pkb::ReduceOp::kSum);
    g_part.mul_(cuda_reciprocal(static_cast<double>(w)));  // `div_(world_size)` as CUDA computes it

    at::Tensor w_part = flat_p.narrow(0, rank * part, part).clone();
    PKB_CHECK(step >= 1, "step must be at least 1");
    const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    m_part.mul_(py_number(beta1)).add_(g_part, 1.0 - beta1);
    v_part.mul_(py_number(beta2)).addcmul_(g_part, g_part, 1.0 - beta2);
    at::Tensor m_hat = m_part * cuda_reciprocal(bc1);  // `m / bc1` as CUDA computes it
    at::Tensor v_hat = v_part * cuda_reciprocal(bc2);
    w_part.add_(m_hat.div(v_hat.sqrt().add(py_number(eps))).mul(py_number(-lr)));

    at::Tensor gathered = at::empty_like(flat_p);
    comm.all_gather_into_tensor(gathered, w_part.contiguous());
    flat_p.copy_(gathered);
    pkb::Outputs outs;
    for (const auto& t : unflatten(flat_p, templates)) outs.push_back(t);
    outs.push_back(m_part);
    outs.push_back(v_part);
    return outs;
  }

  // P parameters of e bytes, a local batch of c rows: NVLink a broadcast of
  // P·e, a reduce-scatter (W-1)/W·P·e and an all-gather (W-1)/W·P·e; HBM ~ 10·P·e (flatten, broadcast, gradient and gather passes)
  // + ~8·P/W·e (the sharded Adam) + the batch; FLOPs 6·c·(d_in·hidden +
  // hidden·d_out) + ~15·P/W.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    double p = 0;
    for (int i = 0; i < kParams; ++i) p += static_cast<double>(in.tensor(2 + i).numel());
    const at::Tensor& x = in.tensor(0);
    const double e = static_cast<double>(x.element_size()), w = world;
    const double c = static_cast<double>(x.size(0)), d_in = static_cast<double>(x.size(1));
    const double hidden = static_cast<double>(in.tensor(2).size(0)), d_out = static_cast<double>(in.tensor(4).size(0));
    pkb::Cost cst;
    cst.nvlink_bytes_per_rank = p * e + 2.0 * (w - 1) / w * p * e;
    cst.hbm_bytes_per_rank = 10.0 * p * e + 8.0 * p / w * e +
                             (static_cast<double>(x.numel()) + static_cast<double>(in.tensor(1).numel())) * e;
    cst.flops_per_rank = 6.0 * c * (d_in * hidden + hidden * d_out) + 15.0 * p / w;
    return cst;
  }
};

}  // namespace

PKB_PROBLEM(Zero2OptimizerShardGrad)
