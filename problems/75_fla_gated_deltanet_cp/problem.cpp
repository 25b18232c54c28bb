// Gated DeltaNet under Ulysses-style context parallelism (catalog §75): an
// all-to-all turns the contiguous sequence shards of q, k, v, gate and beta
// into head shards over the full sequence, each rank runs the fp32 gated delta
// rule recurrence for its heads step by step (the published order: decay the
// state, project k, delta update, read out with q), and an all-to-all returns
// the sequence shards.
#include "../blocks/delta_rule.h"
#include "../blocks/ulysses.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{75, "fla_gated_deltanet_cp",
                             "Gated DeltaNet recurrence with Ulysses-style (all-to-all) context parallelism",
                             "Context Parallel", "FLA (flash-linear-attention) Gated DeltaNet with context parallelism",
                             "any (H = roundup(6, W) heads)"};

constexpr int64_t kLocalSeq = 64;
constexpr int64_t kKeyDim = 256;
constexpr int64_t kValueDim = 512;

int64_t heads_for(int world) { return (6 + world - 1) / world * world; }  // roundup(6, W)

// (B, Ls, H, D) sequence shard <-> (B, W*Ls, H/W, D) head shard.
at::Tensor sequence_to_heads(pkb::Collectives& comm, const at::Tensor& x) {
  return pkb::blocks::list_all_to_all(comm, x, /*scatter_dim=*/2, /*gather_dim=*/1);
}
at::Tensor heads_to_sequence(pkb::Collectives& comm, const at::Tensor& x) {
  return pkb::blocks::list_all_to_all(comm, x, /*scatter_dim=*/1, /*gather_dim=*/2);
}

// F.normalize(x, p=2, dim=-1, eps): x / max(||x||_2, eps).
at::Tensor normalize(const at::Tensor& x, double eps) {
  return x / at::norm(x, 2, {-1}, /*keepdim=*/true).clamp_min(eps).expand_as(x);
}

at::Tensor gated_delta_recurrent(at::Tensor q, at::Tensor k, at::Tensor v, const at::Tensor& gate,
                                 const at::Tensor& beta_in, const at::Tensor& a_log, const at::Tensor& dt_bias_in) {
  const int64_t batch = q.size(0), seq_len = q.size(1), query_heads = q.size(2), key_dim = q.size(3);
  const int64_t value_heads = v.size(2), value_dim = v.size(3);
  const auto out_dtype = q.scalar_type();
  const double scale = std::pow(static_cast<double>(key_dim), -0.5);
  PKB_CHECK(value_heads % query_heads == 0, "value heads must be a multiple of the query heads");
  const int64_t repeat = value_heads / query_heads;

  q = normalize(q.to(at::kFloat), 1e-6);
  k = normalize(k.to(at::kFloat), 1e-6);
  q = q.repeat_interleave(repeat, 2) * scale;
  k = k.repeat_interleave(repeat, 2);

  at::Tensor a_scale = a_log.to(at::kFloat).exp().view({1, 1, value_heads});
  at::Tensor dt_bias = dt_bias_in.to(at::kFloat).view({1, 1, value_heads});
  at::Tensor decay = -a_scale * at::softplus(gate.to(at::kFloat) + dt_bias);

  q = q.permute({0, 2, 1, 3}).contiguous();
  k = k.permute({0, 2, 1, 3}).contiguous();
  v = v.to(at::kFloat).permute({0, 2, 1, 3}).contiguous();
  decay = decay.exp().permute({0, 2, 1}).contiguous();
  at::Tensor beta = beta_in.to(at::kFloat).permute({0, 2, 1}).contiguous();

  const int64_t bh = batch * value_heads;
  q = q.reshape({bh, seq_len, key_dim});
  k = k.reshape({bh, seq_len, key_dim});
  v = v.reshape({bh, seq_len, value_dim});
  decay = decay.reshape({bh, seq_len});
  beta = beta.reshape({bh, seq_len});

  at::Tensor output = pkb::blocks::delta_rule_recurrence(q, k, v, decay, beta);
  output = output.reshape({batch, value_heads, seq_len, value_dim}).permute({0, 2, 1, 3}).contiguous();
  return output.to(out_dtype);
}

class FlaGatedDeltanetCp : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Fixed shapes; H = roundup(6, W). RNG order: q, k, v, gate, beta (beta =
  // bf16 sigmoid of a bf16 randn); a_log and dt_bias are linspaces over all H
  // heads, sliced to this rank's heads.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    auto bf = req.options(at::kBFloat16);
    const int64_t h = heads_for(req.world), hl = h / req.world, start = req.rank * hl;
    return {{"q", at::randn({1, kLocalSeq, h, kKeyDim}, opts)},
            {"k", at::randn({1, kLocalSeq, h, kKeyDim}, opts)},
            {"v", at::randn({1, kLocalSeq, h, kValueDim}, opts)},
            {"gate", at::randn({1, kLocalSeq, h}, opts)},
            {"beta", at::randn({1, kLocalSeq, h}, bf).sigmoid().to(req.dtype)},
            {"a_log", at::linspace(0.0, 0.2, h, bf).slice(0, start, start + hl).contiguous()},
            {"dt_bias", at::linspace(-0.1, 0.1, h, bf).slice(0, start, start + hl).contiguous()},
            {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    at::Tensor q = sequence_to_heads(comm, in.tensor(0));
    at::Tensor k = sequence_to_heads(comm, in.tensor(1));
    at::Tensor v = sequence_to_heads(comm, in.tensor(2));
    at::Tensor gate = sequence_to_heads(comm, in.tensor(3).unsqueeze(-1)).squeeze(-1);
    at::Tensor beta = sequence_to_heads(comm, in.tensor(4).unsqueeze(-1)).squeeze(-1);
    at::Tensor out = gated_delta_recurrent(q, k, v, gate, beta, in.tensor(5), in.tensor(6));
    return {heads_to_sequence(comm, out)};
  }

  // NVLink: five all-to-alls in ((W-1)/W of q, k, v, gate, beta) and one out
  // ((W-1)/W of the output). HBM: inputs read, output written (the state is
  // K x V fp32 per head and step; a fused kernel keeps it on chip). FLOPs:
  // per local head and step ~6 K V (decay, k^T S, rank-1 update, q^T S).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const double w = world, e = static_cast<double>(in.tensor(0).element_size());
    double in_elems = 0;
    for (int i = 0; i < 5; ++i) in_elems += static_cast<double>(in.tensor(i).numel());
    const at::Tensor& v = in.tensor(2);
    const double out_elems = static_cast<double>(v.numel());
    const double hl = static_cast<double>(in.tensor(5).numel()), l = static_cast<double>(v.size(1)) * w;
    return {
        /*nvlink_bytes_per_rank=*/(w - 1) / w * (in_elems + out_elems) * e,
        /*hbm_bytes_per_rank=*/(in_elems + out_elems) * e,
        /*flops_per_rank=*/6.0 * l * hl * static_cast<double>(in.tensor(0).size(3)) * static_cast<double>(v.size(3))};
  }
};

}  // namespace

PKB_PROBLEM(FlaGatedDeltanetCp)
