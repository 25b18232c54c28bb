// FP8 (e4m3) round trip of a local parameter shard under delayed scaling (a
// rolling 16-entry amax history, scale = max(history) / 448, Transformer
// Engine style), then an all-gather of the bf16 reconstructions in rank order
// (the FSDP fp8 parameter all-gather pattern). The scale is per rank. Rounding
// points follow the published reference: the amax is exact, the history bf16,
// the scale fp32, the quantisation a true fp32 division by a 0-d tensor cast
// to e4m3 (round to nearest even). `/ 448.0` on CUDA is a multiplication by
// the fp32 reciprocal, reproduced here so CPU replay matches.
#include "pkb/problem.h"

namespace {

constexpr float kFp8Max = 448.0f;
constexpr int64_t kHistory = 16;

class Fp8AllgatherParams : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{53, "fp8_allgather_params",
                                    "FP8 (E4M3) quantize/dequantize of a local parameter shard with amax history, "
                                    "then all-gather",
                                    "FSDP/ZeRO", "unknown (Transformer Engine-style delayed fp8 scaling, FSDP all-gather)",
                                    "any"};
    return s;
  }

  // seed(53, rank, trial): the shard's randn; the history is a constant.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const int64_t p = std::max<int64_t>(64, std::min<int64_t>(64 * req.m, 4096));
    pkb::Inputs in;
    in.add("flat_param_shard", at::randn({p}, at::TensorOptions().dtype(req.dtype).device(req.device)));
    in.add("amax_history",
           at::full({kHistory}, 1e-8, at::TensorOptions().dtype(at::kBFloat16).device(req.device)));
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& shard = in.tensor(0);
    at::Tensor cur_abs_max = shard.abs().max().to(at::kFloat);
    at::Tensor hist = at::roll(in.tensor(1), {-1}, {0});
    hist.select(0, hist.size(0) - 1).copy_(cur_abs_max);  // `out[-1] = cur.to(out.dtype)`
    at::Tensor scale = at::clamp_min(hist.max(), 1e-12).to(at::kFloat) * static_cast<double>(1.0f / kFp8Max);
    at::Tensor q = (shard.to(at::kFloat) / scale).to(at::kFloat8_e4m3fn);
    at::Tensor recon = (q.to(at::kFloat) * scale).to(shard.scalar_type());
    at::Tensor full = at::empty({comm.world_size() * shard.numel()}, shard.options());
    comm.all_gather_into_tensor(full, recon.contiguous());
    return {full, hist};
  }

  // NVLink: receive the W-1 other ranks' P bf16 values; HBM: the shard read
  // twice (amax, quantisation), the reconstruction written and read, the W·P
  // gathered values written; FLOPs: abs+max, divide, convert, multiply.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& s = in.tensor(0);
    const double p = static_cast<double>(s.numel()), e = static_cast<double>(s.element_size()), w = world;
    pkb::Cost c;
    c.nvlink_bytes_per_rank = (w - 1) * p * e;
    c.hbm_bytes_per_rank = 4.0 * p * e + w * p * e;
    c.flops_per_rank = 5.0 * p;
    return c;
  }
};

}  // namespace

PKB_PROBLEM(Fp8AllgatherParams)
