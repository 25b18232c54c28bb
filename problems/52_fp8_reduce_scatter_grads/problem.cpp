// FP8 (e4m3) round trip of a flat gradient under delayed scaling (a rolling
// 16-entry amax history, scale = max(history) / 448, Transformer Engine style),
// then a bf16 sum reduce-scatter divided by the world size. The scale is per
// rank (never synchronised). Rounding points follow the published reference:
// the amax is exact, the history is bf16, the scale fp32, the quantisation a
// true fp32 division by a 0-d tensor cast to e4m3 (round to nearest even).
// Python-scalar divisions on CUDA are a multiplication by the fp32 reciprocal
// (`/ 448.0`, `div_(world_size)`), reproduced here so CPU replay matches.
#include "pkb/problem.h"

namespace {

constexpr float kFp8Max = 448.0f;
constexpr int64_t kHistory = 16;

class Fp8ReduceScatterGrads : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{52, "fp8_reduce_scatter_grads",
                                    "FP8 (E4M3) quantize/dequantize of a flat gradient with delayed-scaling amax "
                                    "history, then bf16 reduce-scatter mean",
                                    "FSDP/ZeRO", "unknown (Transformer Engine-style delayed fp8 scaling, FSDP grads)",
                                    "any"};
    return s;
  }

  // seed(52, rank, trial): the gradient's randn; the history is a constant.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const int64_t p = shard_elems(req.m);
    pkb::Inputs in;
    in.add("flat_grads", at::randn({p * req.world}, at::TensorOptions().dtype(req.dtype).device(req.device)));
    in.add("amax_history",
           at::full({kHistory}, 1e-8, at::TensorOptions().dtype(at::kBFloat16).device(req.device)));
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& grads = in.tensor(0);
    const int world = comm.world_size();
    PKB_CHECK(grads.numel() % world == 0, "flat_grads has ", grads.numel(), " elements, not a multiple of W = ", world);
    auto [recon, hist] = fp8_round_trip(grads, in.tensor(1));
    at::Tensor out = at::empty({grads.numel() / world}, grads.options());
    comm.reduce_scatter_tensor(out, recon.contiguous(), pkb::ReduceOp::kSum);
    out.mul_(static_cast<double>(1.0f / static_cast<float>(world)));  // div_(W) as CUDA computes it
    return {out, hist};
  }

  // NVLink: a bandwidth-optimal reduce-scatter sends (W-1)/W of the P·W bf16
  // values; HBM: the gradient read twice (amax, quantisation), the bf16
  // reconstruction written and read by the reduce-scatter, the shard written;
  // FLOPs: abs+max, divide, convert, multiply per element, plus (W-1)·P adds.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& g = in.tensor(0);
    const double n = static_cast<double>(g.numel()), e = static_cast<double>(g.element_size()), w = world;
    pkb::Cost c;
    c.nvlink_bytes_per_rank = (w - 1) / w * n * e;
    c.hbm_bytes_per_rank = 4.0 * n * e + n / w * e;
    c.flops_per_rank = 5.0 * n + (w - 1) / w * n;
    return c;
  }

 private:
  static int64_t shard_elems(int64_t m) { return std::max<int64_t>(64, std::min<int64_t>(64 * m, 4096)); }

  // Returns (bf16 reconstruction, updated history).
  static std::pair<at::Tensor, at::Tensor> fp8_round_trip(const at::Tensor& x, const at::Tensor& history) {
    at::Tensor cur_abs_max = x.abs().max().to(at::kFloat);
    at::Tensor hist = at::roll(history, {-1}, {0});
    hist.select(0, hist.size(0) - 1).copy_(cur_abs_max);  // `out[-1] = cur.to(out.dtype)`
    at::Tensor scale = at::clamp_min(hist.max(), 1e-12).to(at::kFloat) * static_cast<double>(1.0f / kFp8Max);
    at::Tensor q = (x.to(at::kFloat) / scale).to(at::kFloat8_e4m3fn);
    return {(q.to(at::kFloat) * scale).to(x.scalar_type()), hist};
  }
};

}  // namespace

PKB_PROBLEM(Fp8ReduceScatterGrads)
