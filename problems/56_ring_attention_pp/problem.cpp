// Two-stage pipeline (CP × PP, Megatron order with TP = DP = 1: rank =
// pp_idx·cp + cp_idx): each stage is an attention layer whose causal ring
// attention (problem 54) runs over the stage's CP group; stage 0 hands its
// output to the stage-1 rank with the same CP index by point-to-point
// send/recv. Every rank returns its own stage's output.
#include "../blocks/group_layout.h"
#include "../blocks/ring_attention.h"
#include "../blocks/shared_seed_draw.h"
#include "pkb/problem.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>
#include <variant>
#include <vector>

namespace {

const pkb::ProblemSpec kSpec{56, "ring_attention_pp",
                             "Two-stage pipeline (P2P activation hand-off) where each stage is an attention layer with "
                             "ring attention over its CP group",
                             "Pipeline Parallel",
                             "Megatron-style CP x PP layout (TP = DP = 1) with zhuzilin ring-flash-attention",
                             "W = 1 or even (pp = 2, cp = W/2)"};

using namespace pkb::blocks;

class RingAttentionPp : public pkb::ProblemWithSpec<kSpec, SharedSeedDraw> {
 public:
  RingAttentionPp() : ProblemWithSpec(57) {}

  std::string check_world(int world) const override { return second_axis_check(world, "pp"); }

  // Seeds as published (seeded as problem 57: 42 + 57·1000 ...): hidden_states
  // from the CP index (identical across the two stages; only stage 0 uses
  // it), then w_qkv and w_o from the stage index, both bf16(randn · 0.02).
  // The integrity draws keep the CP and stage offsets, so the stages and CP
  // ranks still share their tensors.
  pkb::Inputs draw(const pkb::InputRequest& req, uint64_t base) const override {
    const int64_t pp = second_axis_size(req.world), cp = req.world / pp;
    const int64_t cp_rank = req.rank % cp, pp_rank = req.rank / cp;
    pkb::Inputs in;
    add_attention_layer_inputs(in, req, cp, kHeads, base + static_cast<uint64_t>(cp_rank),
                               base + 20000 + static_cast<uint64_t>(pp_rank));
    in.add("cp_group", pkb::GroupRanks{iota(pp_rank * cp, 1, cp)});
    in.add("pp_group", pkb::GroupRanks{iota(cp_rank, cp, pp)});
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [hidden, w_qkv, w_o] = in.tensors<3>();
    const int64_t num_heads = in.integer(3);
    const bool causal = in.boolean(5);
    const int64_t hd = w_qkv.size(0) / 3 / num_heads;
    const double scale = softmax_scale(in, 4, hd);
    build_layout(comm);
    const Ring ring = ring_of(comm, layout_.resolve(comm, in.group(6)), in.group(6).ranks);

    // The stage: first/last of the PP group (a missing or 1-rank group is
    // the only stage).
    bool is_first = true, is_last = true;
    pkb::Group pp_group = pkb::kWorld;
    std::vector<int64_t> pp_ranks;
    int pp_rank = 0, pp = 1;
    if (!std::holds_alternative<pkb::None>(in.at(7).value)) {
      pp_ranks = in.group(7).ranks;
      pp_group = layout_.resolve(comm, in.group(7));
      pp = static_cast<int>(pp_ranks.size());
      if (pp > 1) {
        pp_rank = comm.rank(pp_group);
        is_first = pp_rank == 0;
        is_last = pp_rank == pp - 1;
      }
    }

    at::Tensor stage_input;
    if (is_first) {
      stage_input = hidden;
    } else {
      stage_input = at::empty(hidden.sizes(), hidden.options());
      comm.recv(stage_input, static_cast<int>(pp_ranks[(pp_rank - 1 + pp) % pp]), /*tag=*/0, pp_group);
    }
    at::Tensor out = ring_attention_layer(comm, ring, stage_input, w_qkv, w_o, num_heads, scale, causal);
    if (!is_last) comm.send(out.contiguous(), static_cast<int>(pp_ranks[(pp_rank + 1) % pp]), /*tag=*/0, pp_group);
    return {out};
  }

  // Per rank, Dm = 512, H = 8, X = B·S·H·D elements of one q/k/v block,
  // e = 2 bytes, cp ranks in the ring:
  //   NVLink: the ring forwards K and V cp-1 times, (cp-1)·2·X·e, plus the
  //           stage hand-off B·S·Dm·e (sent by stage 0, received by stage 1);
  //   HBM:    hidden read, W_qkv and W_o read, qkv written and read, output
  //           written; the attention as problem 54 over cp blocks;
  //   FLOPs:  projections 2·B·S·Dm·4·H·D; attention of the busiest CP rank,
  //           cp blocks of 4·B·H·S²·D.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const double cp = static_cast<double>(in.group(6).ranks.size());
    const double pp = std::holds_alternative<pkb::None>(in.at(7).value)
                          ? 1.0
                          : static_cast<double>(in.group(7).ranks.size());
    const at::Tensor& hidden = in.tensor(0);
    const double b = hidden.size(0), s = hidden.size(1), dm = hidden.size(2), e = hidden.element_size();
    pkb::Cost c = ring_attention_layer_cost(in, cp, kHeads, static_cast<double>(in.tensor(2).size(1)) / kHeads);
    c.nvlink_bytes_per_rank += pp > 1 ? b * s * dm * e : 0.0;
    return c;
  }

 private:
  // Every rank creates every CP group, then every PP group, in the published
  // order; once per facade (the published harness builds them while making
  // the inputs, outside the timed call).
  void build_layout(pkb::Collectives& comm) const {
    const int64_t world = comm.world_size(), pp = second_axis_size(world), cp = world / pp;
    layout_.build(comm, rows_then_columns(pp, cp));
  }

  const GroupLayout layout_{"CP x PP", false};
};

}  // namespace

PKB_PROBLEM(RingAttentionPp)
