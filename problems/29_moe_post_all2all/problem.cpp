// MoE combine (VeOmni `tokens_post_all2all` on Megatron-LM's unpermute and
// sort_chunks_by_idxs): the expert outputs are regrouped back to (source,
// local expert)-major chunks, sent home with an all-to-all-v, weighted by the
// routing weights and scatter-added into token order. As in 28, the split
// sizes are synthetic and uniform, unrelated to the routing.
#include "../blocks/moe_routing.h"
#include "../blocks/moe_token_dispatcher.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{29, "moe_post_all2all",
                             "MoE combine: reverse chunk regrouping, all-to-all-v back, weight and scatter-add into "
                             "token order",
                             "Expert Parallel",
                             "VeOmni tokens_post_all2all (Megatron-LM unpermute / sort_chunks_by_idxs)", "W divides 8"};

using namespace pkb::blocks;

class MoePostAll2All : public pkb::ProblemWithSpec<kSpec, RoutedTokensDraw> {
 public:
  // RNG order as published: one randperm(8) per token (its first two entries
  // are the token's experts), then per token a randn(2) softmaxed into its two
  // routing weights, then the expert outputs' randn. The integrity and timing
  // draws batch the same distributions (RoutingDraw).
  // Inputs: expert_outputs, routing_weights, selected_experts, num_experts,
  // the W input splits, the W output splits, num_global_tokens_per_local_expert,
  // routing_map, local_input_permutation_mapping, org_hidden_states_shape
  // (M then N), group.
  pkb::Inputs draw(const pkb::InputRequest& req, RoutingDraw how) const override {
    check_even_splits(req, 29);
    const int64_t m = req.m;
    at::Tensor picked = distinct_expert_picks(req, how);  // (M, 2), distinct experts
    at::Tensor routing_map = at::one_hot(picked, kNumExperts).sum(1).t().contiguous().to(at::kBool);  // (8, M)
    // A token's experts in ascending order (torch.where over the map's column).
    at::Tensor selected = std::get<0>(picked.sort(1));
    at::Tensor routing_weights;
    if (how == RoutingDraw::kBatched) {
      routing_weights = at::randn({m, kTopK}, req.options()).softmax(1);
    } else {
      std::vector<at::Tensor> weights;
      weights.reserve(m);
      for (int64_t t = 0; t < m; ++t) weights.push_back(at::randn({kTopK}, req.options()).softmax(0));
      routing_weights = at::stack(weights);
    }
    const int64_t routed = kTopK * m;
    at::Tensor expert_outputs = at::randn({routed, req.n}, req.options());
    at::Tensor perm = expert_major_token_ids(routing_map);

    pkb::Inputs in{{"expert_outputs", expert_outputs},
                   {"routing_weights", routing_weights},
                   {"selected_experts", selected},
                   {"num_experts", kNumExperts}};
    add_uniform_dispatch_sizes(in, req, routed);
    in.add("routing_map", routing_map);
    in.add("local_input_permutation_mapping", perm);
    in.add("org_hidden_states_shape.0", m);
    in.add("org_hidden_states_shape.1", req.n);
    in.add("group", pkb::None{});
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size();
    const auto [expert_outputs, routing_weights, selected] = in.tensors<3>();
    const SplitArgs splits = splits_at(in, 4, world);
    const size_t k = 4 + 2 * world;
    const at::Tensor& tokens_per_local_expert = in.tensor(k);
    const at::Tensor& routing_map = in.tensor(k + 1);
    const at::Tensor& perm = in.tensor(k + 2);
    const int64_t m = in.integer(k + 3);

    // Undo 28's regrouping, send the rows home with the split lists swapped,
    // weight them and scatter-add them into token order.
    at::Tensor regrouped = chunks_by_source(expert_outputs, tokens_per_local_expert);
    at::Tensor home = all_to_all_rows(comm, regrouped, splits.in, splits.out);
    return {unpermute(home, routing_weights, selected, routing_map, perm, m)};
  }

  // The 2M expert-output rows: (W-1)/W of them leave and as many arrive. HBM:
  // the expert outputs read, the (M, N) output written; per routed element a
  // multiply and an add.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& eo = in.tensor(0);
    const double rows = static_cast<double>(eo.size(0)), n = static_cast<double>(eo.size(1));
    const double e = static_cast<double>(eo.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) / w * rows * n * e,
            /*hbm_bytes_per_rank=*/rows * n * e + rows / 2.0 * n * e + rows * 8.0,
            /*flops_per_rank=*/2.0 * rows * n};
  }
};

}  // namespace

PKB_PROBLEM(MoePostAll2All)
