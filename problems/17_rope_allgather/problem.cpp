// Rotary position embedding (HF transformers `rotate_half` convention) applied
// to sequence-sharded q and k, then each is all-gathered along the sequence.
// Rounding order matters (catalog §17): q*cos, rotate_half(q)*sin and their sum
// are three separate bf16 roundings; one fp32 evaluation fails near zero.
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{17, "rope_allgather", "Rotary embedding on sequence shards, then sequence all-gather",
                             "Sequence Parallel", "HF transformers (Llama rotate_half RoPE) + sequence all-gather",
                             "W divides 8"};

constexpr int64_t kHeads = 8;
constexpr int64_t kHeadDim = 64;

class RopeAllgather : public pkb::ProblemWithSpec<kSpec> {
 public:
  // The published input builder asserts 8 % W == 0.
  std::string check_world(int world) const override {
    return world >= 1 && 8 % world == 0 ? "" : "the world size must divide 8";
  }

  // B = max(1, M/64) batches, T = max(1, N/64) tokens in all, S = max(1, T/W)
  // per rank. RNG order as published: q, k, cos, sin (cos/sin are plain randn,
  // not real cosines).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    const int64_t b = std::max<int64_t>(1, req.m / 64), t = std::max<int64_t>(1, req.n / 64);
    const int64_t s = std::max<int64_t>(1, t / req.world);
    return {{"q_local", at::randn({b, s, kHeads, kHeadDim}, opts)},
            {"k_local", at::randn({b, s, kHeads, kHeadDim}, opts)}, {"cos_local", at::randn({b, s, kHeadDim}, opts)},
            {"sin_local", at::randn({b, s, kHeadDim}, opts)}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    at::Tensor cos = in.tensor(2).unsqueeze(2);  // broadcast over the head axis
    at::Tensor sin = in.tensor(3).unsqueeze(2);
    auto rotate_half = [](const at::Tensor& x) {
      const int64_t half = x.size(-1) / 2;
      return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
    };
    auto rope = [&](const at::Tensor& x) { return x * cos + rotate_half(x) * sin; };
    at::Tensor q = rope(in.tensor(0)).contiguous();
    at::Tensor k = rope(in.tensor(1)).contiguous();
    auto gather_seq = [&](const at::Tensor& x) {
      std::vector<at::Tensor> parts(comm.world_size());
      for (auto& p : parts) p = at::empty_like(x);
      comm.all_gather(parts, x);
      return at::cat(parts, 1);
    };
    at::Tensor q_global = gather_seq(q);  // q before k, as published
    at::Tensor k_global = gather_seq(k);
    return {q_global, k_global};
  }

  // Two all-gathers, each receiving the W-1 other shards of B*S*H*D elements;
  // HBM: q, k, cos, sin read, both gathered outputs written; ~3 flops per
  // element of q and k.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& q = in.tensor(0);
    const double shard = static_cast<double>(q.numel()), e = static_cast<double>(q.element_size());
    const double rows = static_cast<double>(in.tensor(2).numel()), w = world;
    return {/*nvlink_bytes_per_rank=*/2.0 * (w - 1) * shard * e,
            /*hbm_bytes_per_rank=*/(2.0 * shard + 2.0 * rows) * e + 2.0 * w * shard * e,
            /*flops_per_rank=*/6.0 * shard};
  }
};

}  // namespace

PKB_PROBLEM(RopeAllgather)
