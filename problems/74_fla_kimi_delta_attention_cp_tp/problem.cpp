// Kimi Delta Attention (gated delta rule with a per-key-dim decay) with the
// sequence all-gathered over a context-parallel group and the output summed
// over a tensor-parallel pair (catalog §74). Every CP rank runs the whole fp32
// recurrence step by step in the published order, then keeps its own slice.
// Layout (catalog §0.5) for W >= 4 even: TP pairs {2c, 2c+1}, CP groups
// {t, t+2, t+4, ...}; otherwise CP = world and no TP.
#include "../blocks/delta_rule.h"
#include "../blocks/group_layout.h"
#include <map>

#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{74, "fla_kimi_delta_attention_cp_tp",
                             "Kimi Delta Attention with a CP sequence all-gather and a TP output all-reduce",
                             "Tensor Parallel",
                             "FLA (flash-linear-attention) Kimi Delta Attention with context parallelism",
                             "any (tp = 2 if W >= 4 and even, else CP only)"};

using namespace pkb::blocks;

constexpr int64_t kLocalSeq = 64;
constexpr int64_t kHeads = 16;
constexpr int64_t kKeyDim = 128;
constexpr int64_t kValueDim = 128;
constexpr double kLowerBound = -5.0;

bool tp_layout(int64_t world) { return world >= 4 && world % 2 == 0; }

// (B, Ls, ...) -> (B, cp*Ls, ...), gathered in CP-rank order.
at::Tensor all_gather_sequence(pkb::Collectives& comm, const at::Tensor& x, pkb::Group g) {
  const int64_t world = comm.world_size(g), batch = x.size(0), local_seq = x.size(1);
  std::vector<int64_t> out_shape{batch, world * local_seq}, recv_shape{world * local_seq, batch};
  for (int64_t d = 2; d < x.dim(); ++d) {
    out_shape.push_back(x.size(d));
    recv_shape.push_back(x.size(d));
  }
  at::Tensor send = x.transpose(0, 1).contiguous();
  at::Tensor recv = at::empty(recv_shape, x.options());
  comm.all_gather_into_tensor(recv, send, g);
  return recv.transpose(0, 1).contiguous().view(out_shape);
}

at::Tensor normalize(const at::Tensor& x) {  // F.normalize(x, p=2, dim=-1), eps 1e-12
  return x / at::norm(x, 2, {-1}, /*keepdim=*/true).clamp_min(1e-12).expand_as(x);
}

at::Tensor kda_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                       const at::Tensor& beta_in, const at::Tensor& a_log, const at::Tensor& dt_bias_in) {
  const int64_t batch = q.size(0), seq_len = q.size(1), heads = q.size(2), key_dim = q.size(3);
  const int64_t value_dim = v.size(-1);
  const auto out_dtype = q.scalar_type();

  at::Tensor dt_bias = dt_bias_in.to(at::kFloat).reshape({heads, key_dim});
  at::Tensor a_scale = a_log.to(at::kFloat).exp().view({1, 1, heads, 1});
  at::Tensor decay = at::exp(kLowerBound * at::sigmoid(a_scale * (g.to(at::kFloat) + dt_bias)));
  at::Tensor beta = beta_in.to(at::kFloat).sigmoid();

  const double scale = std::pow(static_cast<double>(key_dim), -0.5);
  at::Tensor qf = normalize(q.to(at::kFloat)) * scale;
  at::Tensor kf = normalize(k.to(at::kFloat));
  at::Tensor vf = v.to(at::kFloat);

  const int64_t bh = batch * heads;
  qf = qf.permute({0, 2, 1, 3}).contiguous().reshape({bh, seq_len, key_dim});
  kf = kf.permute({0, 2, 1, 3}).contiguous().reshape({bh, seq_len, key_dim});
  vf = vf.permute({0, 2, 1, 3}).contiguous().reshape({bh, seq_len, value_dim});
  decay = decay.permute({0, 2, 1, 3}).contiguous().reshape({bh, seq_len, key_dim});
  beta = beta.permute({0, 2, 1}).contiguous().reshape({bh, seq_len});

  at::Tensor output = delta_rule_recurrence(qf, kf, vf, decay, beta);
  output = output.reshape({batch, heads, seq_len, value_dim}).permute({0, 2, 1, 3}).contiguous();
  return output.to(out_dtype);
}

class FlaKimiDeltaAttentionCpTp : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Fixed shapes. RNG order q, k, v, g, beta (per rank, TP partners too);
  // a_log and dt_bias are bf16 linspaces. Groups: the CP group then the TP
  // group (None without TP), as published.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    auto bf = req.options(at::kBFloat16);
    pkb::Inputs in{{"q", at::randn({1, kLocalSeq, kHeads, kKeyDim}, opts)},
                   {"k", at::randn({1, kLocalSeq, kHeads, kKeyDim}, opts)},
                   {"v", at::randn({1, kLocalSeq, kHeads, kValueDim}, opts)},
                   {"g", at::randn({1, kLocalSeq, kHeads, kKeyDim}, opts)},
                   {"beta", at::randn({1, kLocalSeq, kHeads}, opts)}, {"a_log", at::linspace(-0.1, 0.1, kHeads, bf)},
                   {"dt_bias", at::linspace(-0.1, 0.1, kHeads * kKeyDim, bf)}};
    if (tp_layout(req.world)) {
      const int64_t cp = req.world / 2;
      in.add("cp_group", pkb::GroupRanks{iota(req.rank % 2, 2, cp)});
      in.add("tp_group", pkb::GroupRanks{iota(req.rank / 2 * 2, 1, 2)});
    } else {
      in.add("cp_group", pkb::GroupRanks{iota(0, 1, req.world)});
      in.add("tp_group", pkb::None{});
    }
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const bool has_tp = std::holds_alternative<pkb::GroupRanks>(in.at(8).value);
    if (has_tp) build_layout(comm);
    const pkb::Group cp_group = layout_.resolve(comm, in.group(7));
    const int cp_size = comm.world_size(cp_group), cp_rank = comm.rank(cp_group);

    at::Tensor q = in.tensor(0), k = in.tensor(1), v = in.tensor(2), g = in.tensor(3), beta = in.tensor(4);
    if (cp_size > 1) {
      q = all_gather_sequence(comm, q, cp_group);
      k = all_gather_sequence(comm, k, cp_group);
      v = all_gather_sequence(comm, v, cp_group);
      g = all_gather_sequence(comm, g, cp_group);
      beta = all_gather_sequence(comm, beta, cp_group);
    }
    at::Tensor out = kda_forward(q, k, v, g, beta, in.tensor(5), in.tensor(6));
    if (has_tp) {
      const pkb::Group tp_group = layout_.resolve(comm, in.group(8));
      if (comm.world_size(tp_group) > 1) comm.all_reduce(out, pkb::ReduceOp::kSum, tp_group);
    }
    if (cp_size == 1) return {out};
    const int64_t local_seq = in.tensor(0).size(1);
    return {out.slice(1, cp_rank * local_seq, (cp_rank + 1) * local_seq).contiguous()};
  }

  // NVLink: the CP all-gather receives (cp-1) shards of q, k, v, g, beta; the
  // TP all-reduce (pairs: one exchange) moves the full bf16 output once.
  // HBM: the gathered inputs written and read, the output written. FLOPs:
  // ~6 K V per head and step over the full length, on every CP rank.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const bool has_tp = std::holds_alternative<pkb::GroupRanks>(in.at(8).value);
    const double cp = static_cast<double>(in.group(7).ranks.size());
    const double e = static_cast<double>(in.tensor(0).element_size());
    double shard = 0;
    for (int i = 0; i < 5; ++i) shard += static_cast<double>(in.tensor(i).numel());
    const at::Tensor& v = in.tensor(2);
    const double full_out = static_cast<double>(v.numel()) * cp;
    const double l = static_cast<double>(v.size(1)) * cp;
    return {/*nvlink_bytes_per_rank=*/(cp - 1) * shard * e + (has_tp ? full_out * e : 0.0),
            /*hbm_bytes_per_rank=*/2.0 * cp * shard * e + full_out * e,
            /*flops_per_rank=*/6.0 * l * static_cast<double>(v.size(2)) * static_cast<double>(in.tensor(0).size(3)) *
                static_cast<double>(v.size(3))};
  }

 private:
  // Every rank creates every TP pair, then every CP set, in the published
  // order (_build_tp_cp_groups); once per facade.
  void build_layout(pkb::Collectives& comm) const {
    const int64_t world = comm.world_size(), cp = world / 2;
    layout_.build(comm, rows_then_columns(cp, 2));
  }

  const GroupLayout layout_{"TP x CP", true};
};

}  // namespace

PKB_PROBLEM(FlaKimiDeltaAttentionCpTp)
