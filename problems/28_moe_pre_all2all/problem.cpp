// MoE dispatch (VeOmni `token_pre_all2all` on Megatron-LM's permute and
// sort_chunks_by_idxs): tokens are permuted expert-major, exchanged with an
// all-to-all-v, and the received chunks regrouped by local expert. As
// published, the split sizes are synthetic and uniform (2M/W rows per peer,
// 2M/8 rows per chunk), unrelated to the actual routing.
#include "../blocks/moe_routing.h"
#include "../blocks/moe_token_dispatcher.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{28, "moe_pre_all2all",
                             "MoE dispatch: permute tokens by expert, all-to-all-v, regroup chunks by local expert",
                             "Expert Parallel", "VeOmni token_pre_all2all (Megatron-LM permute / sort_chunks_by_idxs)",
                             "W divides 8"};

using namespace pkb::blocks;

class MoePreAll2All : public pkb::ProblemWithSpec<kSpec, RoutedTokensDraw> {
 public:
  // RNG order as published: hidden_states' randn, then one randperm(8) per
  // token whose first two entries are the token's (distinct) experts. The
  // integrity and timing draws batch the same distributions (RoutingDraw).
  // Inputs: hidden_states, expert_mask (8, 2, M) fp32, num_experts, the W input
  // splits, the W output splits, num_global_tokens_per_local_expert, group.
  pkb::Inputs draw(const pkb::InputRequest& req, RoutingDraw how) const override {
    check_even_splits(req, 28);
    at::Tensor hidden = at::randn({req.m, req.n}, req.options());
    // [e, k, t] = 1 iff token t's k-th pick is e.
    at::Tensor expert_mask =
        at::one_hot(distinct_expert_picks(req, how), kNumExperts).permute({2, 1, 0}).contiguous().to(at::kFloat);
    const int64_t routed = kTopK * req.m;  // always: the two picks are distinct
    pkb::Inputs in{{"hidden_states", hidden}, {"expert_mask", expert_mask}, {"num_experts", kNumExperts}};
    add_uniform_dispatch_sizes(in, req, routed);
    in.add("group", pkb::None{});
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size();
    const auto [hidden_in, expert_mask] = in.tensors<2>();
    const SplitArgs splits = splits_at(in, 3, world);
    const at::Tensor& tokens_per_local_expert = in.tensor(3 + 2 * world);

    at::Tensor hidden = hidden_in.reshape({-1, hidden_in.size(-1)});
    at::Tensor routing_map = expert_mask.sum(1);
    at::Tensor perm_idx = expert_major_token_ids(routing_map);
    at::Tensor permuted = hidden.index_select(0, perm_idx);
    check_split_rows(splits.in, permuted);
    at::Tensor received = all_to_all_rows(comm, permuted, splits.out, splits.in);
    at::Tensor global_permuted = chunks_by_local_expert(received, tokens_per_local_expert);
    // The published fourth output, hidden_states.shape (a torch.Size), is no
    // tensor: pkb::Outputs holds tensors only (see the README).
    return {global_permuted, routing_map, perm_idx};
  }

  // The 2M permuted rows: (W-1)/W of them leave and as many arrive. HBM: the
  // routed rows are read from hidden_states and the regrouped rows written,
  // plus the mask read and the routing map and index list written.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [hidden, mask] = in.tensors<2>();
    const double m = static_cast<double>(hidden.size(0)), n = static_cast<double>(hidden.size(1));
    const double e = static_cast<double>(hidden.element_size()), w = world;
    const double routed = 2.0 * m;
    return {/*nvlink_bytes_per_rank=*/(w - 1) / w * routed * n * e,
            /*hbm_bytes_per_rank=*/2.0 * routed * n * e + static_cast<double>(mask.numel()) * 4.0 +
                static_cast<double>(mask.size(0)) * m * 4.0 + routed * 8.0,
            /*flops_per_rank=*/static_cast<double>(mask.numel())};  // the sum over the top-k dimension
  }
};

}  // namespace

PKB_PROBLEM(MoePreAll2All)
