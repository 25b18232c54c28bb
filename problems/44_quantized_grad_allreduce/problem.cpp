// Block-wise int8 quantise-dequantise of a flat gradient, fp32 sum all-reduce
// of the dequantised values, average, cast back to the gradient's dtype
// (quantised gradient communication, catalog §44). Rounding order as
// published; the two divisions by Python numbers (amax / 127 and acc / W) are
// multiplies by the fp32 reciprocal on CUDA, and are spelled out that way so
// that the CPU computes the same block scales (an IEEE amax / 127 changes a
// few hundred scales and fails the check, catalog §44).
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{44, "quantized_grad_allreduce",
                             "Block-wise int8 quantise-dequantise of a gradient, fp32 all-reduce, average",
                             "Data Parallel", "quantised gradient communication (DeepSpeed ZeRO++ style; not stated)",
                             "any"};

class QuantizedGradAllreduce : public pkb::ProblemWithSpec<kSpec> {
 public:
  // n = max(M·N, 64·W) elements of randn (per-rank seed); block size
  // min(128, max(16, N/4)).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const int64_t n = std::max<int64_t>(req.m * req.n, 64 * req.world);
    const int64_t block = std::min<int64_t>(128, std::max<int64_t>(16, std::max<int64_t>(req.n / 4, 16)));
    return {{"flat_grad", at::randn({n}, req.options())}, {"block_size", block}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& flat_grad = in.tensor(0);
    const int64_t block = in.integer(1);
    PKB_CHECK(block >= 1, "block_size must be at least 1");
    const int64_t w = comm.world_size();
    at::Tensor x = flat_grad.reshape(-1);
    const int64_t n = x.numel();
    at::Tensor rec;
    if (n == 0) {
      rec = x.clone();
    } else {
      at::Tensor flat = x.contiguous().reshape(-1);
      const int64_t pad = ((-n) % block + block) % block;
      if (pad) flat = at::constant_pad_nd(flat, {0, pad}, 0);
      at::Tensor xv = flat.view({flat.numel() / block, block});
      at::Tensor scales = xv.abs().amax(1).to(at::kFloat).clamp_min(1e-8);
      scales = scales * static_cast<double>(1.0f / 127.0f);  // `/ 127.0` on CUDA
      at::Tensor q = (xv.to(at::kFloat) / scales.unsqueeze(1)).round().clamp(-127, 127).to(at::kChar);
      rec = (q.to(at::kFloat) * scales.unsqueeze(1)).reshape(-1).slice(0, 0, n);
    }
    at::Tensor acc = rec.to(at::kFloat).contiguous();  // `.float()` of the float32 result is the result itself
    comm.all_reduce(acc, pkb::ReduceOp::kSum);
    acc.mul_(static_cast<double>(1.0f / static_cast<float>(w)));  // `div_(world_size)` on CUDA
    return {acc.to(flat_grad.scalar_type()).reshape(flat_grad.sizes())};
  }

  // With n elements: NVLink 2(W-1)/W·4n (a bandwidth-optimal fp32 all-reduce,
  // each way); HBM the bf16 gradient read, the fp32 buffer written/read by the
  // all-reduce, the bf16 result written; FLOPs ~6n (abs, amax, divide, round,
  // multiply, average) + (W-1)/W·n reduction adds.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& g = in.tensor(0);
    const double n = static_cast<double>(g.numel()), e = static_cast<double>(g.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/2.0 * (w - 1) / w * 4.0 * n,
            /*hbm_bytes_per_rank=*/2.0 * n * e + 2.0 * 4.0 * n,
            /*flops_per_rank=*/6.0 * n + (w - 1) / w * n};
  }
};

}  // namespace

PKB_PROBLEM(QuantizedGradAllreduce)
