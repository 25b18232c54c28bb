// Per-128-element block fp8 (e4m3) quantisation of activations (DeepSeek-V3
// style: scale = amax / 448), then all-gathers of the values and the scales.
//
// The published reference is a Triton kernel whose two divisions lower to PTX
// div.full.f32 (approximate), not IEEE division, and the difference flips fp8
// values by a whole step near rounding ties (catalog §19: IEEE division
// changes ~0.1% of the values, all of them out of tolerance). Measured on an
// H200: div.full.f32(a, b) equals fl32(a * rcp.approx(b)), amax / 448 equals
// amax * fl32(1/448), and rcp.approx of the scale depends only on the 7
// mantissa bits of the bf16 amax (up to a power of two). So the reference
// multiplies by a 128-entry table of the hardware reciprocals; it then
// reproduces div.full.f32 bit-for-bit on any device for every bf16 amax in
// [2^-116, 2^127) (exhaustively checked against the instruction, all x).
#include <cmath>

#include "pkb/integrity.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{19, "blocked_fp8_quantize",
                             "Per-128-element block fp8 quantisation, then all-gather of values and scales",
                             "Tensor Parallel", "DeepSeek-V3-style block-128 fp8 activation quantisation (Triton)",
                             "any (N divisible by 128)"};

constexpr int64_t kBlock = 128;
constexpr float kFp8Max = 448.0f;

// rcp.approx.f32(fl32(m * fl32(1/448))) for m = 1 + k/128, k = 0..127, as
// float bits, measured on NVIDIA H200 (sm_90). 18 entries differ from the
// correctly rounded reciprocal.
constexpr uint32_t kRcpBits[kBlock] = {
    0x43e00000, 0x43de4379, 0x43dc8dc8, 0x43dadec6, 0x43d9364d, 0x43d79436, 0x43d5f85b, 0x43d4629b,
    0x43d2d2d2, 0x43d148df, 0x43cfc4a3, 0x43ce45fc, 0x43cccccd, 0x43cb58f6, 0x43c9ea5d, 0x43c880e5,
    0x43c71c71, 0x43c5bce8, 0x43c46231, 0x43c30c31, 0x43c1bacf, 0x43c06df5, 0x43bf258c, 0x43bde17b,
    0x43bca1ae, 0x43bb6610, 0x43ba2e8b, 0x43b8fb0b, 0x43b7cb7c, 0x43b69fcc, 0x43b577e5, 0x43b453b9,
    0x43b33333, 0x43b21642, 0x43b0fcd7, 0x43afe6df, 0x43aed44b, 0x43adc50a, 0x43acb90f, 0x43abb049,
    0x43aaaaaa, 0x43a9a824, 0x43a8a8a9, 0x43a7ac2a, 0x43a6b29a, 0x43a5bbee, 0x43a4c817, 0x43a3d709,
    0x43a2e8ba, 0x43a1fd1b, 0x43a11422, 0x43a02dc3, 0x439f49f4, 0x439e68a9, 0x439d89d8, 0x439cad77,
    0x439bd37a, 0x439afbd9, 0x439a2689, 0x43995382, 0x439882b9, 0x4397b425, 0x4396e7bf, 0x43961d7c,
    0x43955555, 0x43948f41, 0x4393cb37, 0x43930930, 0x43924924, 0x43918b0b, 0x4390cede, 0x43901495,
    0x438f5c29, 0x438ea592, 0x438df0cb, 0x438d3dca, 0x438c8c8c, 0x438bdd09, 0x438b2f38, 0x438a8317,
    0x4389d89d, 0x43892fc5, 0x43888888, 0x4387e2e1, 0x43873ecb, 0x43869c3e, 0x4385fb37, 0x43855baf,
    0x4384bda1, 0x43842108, 0x438385df, 0x4382ec21, 0x438253c8, 0x4381bcd0, 0x43812735, 0x438092f1,
    0x43800000, 0x437edcb9, 0x437dbc08, 0x437c9de1, 0x437b823e, 0x437a6914, 0x4379525d, 0x43783e0f,
    0x43772c22, 0x43761c90, 0x43750f50, 0x4374045b, 0x4372fba9, 0x4371f532, 0x4370f0f1, 0x436feedb,
    0x436eeeee, 0x436df120, 0x436cf56b, 0x436bfbc8, 0x436b0432, 0x436a0ea1, 0x43691b0d, 0x43682974,
    0x436739cd, 0x43664c14, 0x43656041, 0x4364764f, 0x43638e39, 0x4362a7f6, 0x4361c386, 0x4360e0e0,
};

class BlockedFp8Quantize : public pkb::ProblemWithSpec<kSpec> {
 public:
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    PKB_CHECK(req.n % kBlock == 0, "N must be a multiple of ", kBlock, " (got ", req.n, ")");
    return {{"local_tensor", at::randn({req.m, req.n}, req.options())}, {"block_size", kBlock}};
  }

  // NOTE [integrity trials] (pkb/integrity.h): for randn activations every
  // block's scale amax / 448 is about 0.007, below the tolerance's 0.01, so
  // an all-zeros scale output passed. Here each 128-element block of the
  // published draw is multiplied by its own factor e^u, u uniform in [-1, 5]
  // (this rank's seed; the product rounded to the input dtype): scales from
  // ~0.002 to ~1, and fp8 values that still depend on every element.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = make_inputs(req);
    const at::Tensor& t = in.tensor(0);
    at::Tensor u = at::rand({t.size(0), t.size(1) / kBlock, 1}, t.options().dtype(at::kFloat));
    at::Tensor x = t.to(at::kFloat).view({t.size(0), t.size(1) / kBlock, kBlock}) * at::exp(u * 6.0 - 1.0);
    in.args()[0].value = x.view(t.sizes()).to(t.scalar_type()).contiguous();
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);
    PKB_CHECK(in.integer(1) == kBlock, "block_size must be ", kBlock);
    PKB_CHECK(t.size(-1) % kBlock == 0, "the last dim must be a multiple of ", kBlock);
    at::Tensor x = t.to(at::kFloat).reshape({-1, kBlock});  // blocks never cross rows
    at::Tensor amax = x.abs().amax(1, /*keepdim=*/true);
    at::Tensor scale = amax * static_cast<double>(1.0f / kFp8Max);
    at::Tensor q = (x * hardware_reciprocal(amax, scale)).clamp(-kFp8Max, kFp8Max);  // satfinite
    at::Tensor y = q.to(at::kFloat8_e4m3fn).view(t.sizes());
    at::Tensor s = scale.view({t.size(0), t.size(1) / kBlock});

    const int world = comm.world_size();
    // The published reference gathers the fp8 values as raw bytes.
    at::Tensor y_bytes = y.view(at::kByte);
    std::vector<at::Tensor> y_parts(world), s_parts(world);
    for (auto& p : y_parts) p = at::empty_like(y_bytes);
    for (auto& p : s_parts) p = at::empty_like(s);
    comm.all_gather(y_parts, y_bytes);
    comm.all_gather(s_parts, s);
    return {at::cat(y_parts, 0).view(at::kFloat8_e4m3fn), at::cat(s_parts, 0)};
  }

  // Receive the W-1 other shards of fp8 values (1 B each) and scales (4 B per
  // 128 values); HBM: bf16 read, local fp8 + scales written, the gathered
  // tensors written; ~3 flops per element (abs/max, multiply, convert).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);
    const double mn = static_cast<double>(t.numel()), w = world;
    const double shard_bytes = mn + mn / kBlock * 4.0;
    return {/*nvlink_bytes_per_rank=*/(w - 1) * shard_bytes,
            /*hbm_bytes_per_rank=*/mn * t.element_size() + shard_bytes + w * shard_bytes,
            /*flops_per_rank=*/3.0 * mn};
  }

 private:
  // 1/scale as rcp.approx.f32 computes it: the table entry of amax's mantissa
  // scaled by 2^-exponent (exact). Outside the checked amax range, and for an
  // all-zero block (scale 0 -> divisor 1), the IEEE reciprocal of the divisor.
  static at::Tensor hardware_reciprocal(const at::Tensor& amax, const at::Tensor& scale) {
    at::Tensor table = at::from_blob(const_cast<uint32_t*>(kRcpBits), {kBlock}, at::kInt)
                           .view(at::kFloat)
                           .to(amax.device(), /*non_blocking=*/false, /*copy=*/true);
    at::Tensor bits = amax.view(at::kInt);
    at::Tensor mantissa = bits.bitwise_right_shift(16).bitwise_and(0x7F).to(at::kLong);
    at::Tensor exponent = bits.bitwise_right_shift(23).bitwise_and(0xFF).sub(127).to(at::kFloat);
    at::Tensor from_table = table.index_select(0, mantissa.reshape({-1})).view_as(amax) * at::exp2(-exponent);
    at::Tensor in_range = amax.ge(std::ldexp(1.0, -116)).logical_and(amax.lt(std::ldexp(1.0, 127)));
    at::Tensor divisor = at::where(scale.eq(0), at::ones_like(scale), scale);
    return at::where(in_range, from_table, at::reciprocal(divisor));
  }
};

}  // namespace

PKB_PROBLEM(BlockedFp8Quantize)
