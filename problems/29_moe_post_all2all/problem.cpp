// MoE combine (VeOmni `tokens_post_all2all` on Megatron-LM's unpermute and
// sort_chunks_by_idxs): the expert outputs are regrouped back to (source,
// local expert)-major chunks, sent home with an all-to-all-v, weighted by the
// routing weights and scatter-added into token order. As in 28, the split
// sizes are synthetic and uniform, unrelated to the routing.
#include "../blocks/moe_routing.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{29, "moe_post_all2all",
                             "MoE combine: reverse chunk regrouping, all-to-all-v back, weight and scatter-add into "
                             "token order",
                             "Expert Parallel",
                             "VeOmni tokens_post_all2all (Megatron-LM unpermute / sort_chunks_by_idxs)", "W divides 8"};

using namespace pkb::blocks;

class MoePostAll2All : public pkb::ProblemWithSpec<kSpec> {
 public:
  std::string check_world(int world) const override { return moe_experts_check(world); }

  // RNG order as published: one randperm(8) per token (its first two entries
  // are the token's experts), then per token a randn(2) softmaxed into its two
  // routing weights, then the expert outputs' randn. The integrity and timing
  // draws batch the same distributions (RoutingDraw).
  // Inputs: expert_outputs, routing_weights, selected_experts, num_experts,
  // the W input splits, the W output splits, num_global_tokens_per_local_expert,
  // routing_map, local_input_permutation_mapping, org_hidden_states_shape
  // (M then N), group.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    return draw(req, RoutingDraw::kPublished);
  }
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    return draw(req, RoutingDraw::kBatched);
  }

  pkb::Inputs draw(const pkb::InputRequest& req, RoutingDraw how) const {
    check_even_splits(req, 29);
    auto opts = at::device(req.device);
    const int64_t m = req.m;
    at::Tensor picked = distinct_expert_picks(req, how);  // (M, 2), distinct experts
    at::Tensor routing_map = at::one_hot(picked, kNumExperts).sum(1).t().contiguous().to(at::kBool);  // (8, M)
    // A token's experts in ascending order (torch.where over the map's column).
    at::Tensor selected = std::get<0>(picked.sort(1));
    at::Tensor routing_weights;
    if (how == RoutingDraw::kBatched) {
      routing_weights = at::randn({m, kTopK}, opts.dtype(req.dtype)).softmax(1);
    } else {
      std::vector<at::Tensor> weights;
      weights.reserve(m);
      for (int64_t t = 0; t < m; ++t) weights.push_back(at::randn({kTopK}, opts.dtype(req.dtype)).softmax(0));
      routing_weights = at::stack(weights);
    }
    const int64_t routed = kTopK * m;
    at::Tensor expert_outputs = at::randn({routed, req.n}, opts.dtype(req.dtype));
    // Expert-major, tokens ascending within an expert.
    at::Tensor perm =
        at::arange(m, opts.dtype(at::kLong)).unsqueeze(0).expand({kNumExperts, m}).masked_select(routing_map);

    pkb::Inputs in;
    in.add("expert_outputs", expert_outputs);
    in.add("routing_weights", routing_weights);
    in.add("selected_experts", selected);
    in.add("num_experts", kNumExperts);
    add_uniform_splits(in, req, routed);
    in.add("num_global_tokens_per_local_expert", uniform_tokens_per_local_expert(req, routed));
    in.add("routing_map", routing_map);
    in.add("local_input_permutation_mapping", perm);
    in.add("org_hidden_states_shape.0", m);
    in.add("org_hidden_states_shape.1", req.n);
    in.add("group", pkb::None{});
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size();
    const at::Tensor& expert_outputs = in.tensor(0);
    const at::Tensor& routing_weights = in.tensor(1);
    const at::Tensor& selected = in.tensor(2);
    const int64_t num_experts = in.integer(3);
    const SplitArgs splits = splits_at(in, 4, world);
    const size_t k = 4 + 2 * world;
    const at::Tensor& tokens_per_local_expert = in.tensor(k);
    const at::Tensor& routing_map = in.tensor(k + 1);
    const at::Tensor& perm = in.tensor(k + 2);
    const int64_t m = in.integer(k + 3), n = in.integer(k + 4);

    // Undo 28's regrouping: the chunks are (local expert, source)-major, sized
    // by the transpose of the count table; order them (source, local expert)-major.
    const int64_t local_experts = num_experts / world;
    at::Tensor sizes_t = tokens_per_local_expert.t().reshape({-1}).cpu().contiguous();
    std::vector<int64_t> sizes(sizes_t.data_ptr<int64_t>(), sizes_t.data_ptr<int64_t>() + sizes_t.numel());
    std::vector<at::Tensor> chunks = expert_outputs.split_with_sizes(sizes, 0);
    std::vector<at::Tensor> ordered;
    for (int64_t src = 0; src < world; ++src)
      for (int64_t le = 0; le < local_experts; ++le) ordered.push_back(chunks[le * world + src]);
    at::Tensor regrouped = at::cat(ordered, 0);

    // Sent back with the split lists swapped (receive input_splits, send output_splits).
    at::Tensor home = regrouped.contiguous();
    if (world > 1) {
      home = at::empty({splits.in_rows, regrouped.size(1)}, regrouped.options());
      comm.all_to_all_single(home, regrouped.contiguous(), splits.in, splits.out);
    }

    at::Tensor weights_idx = at::zeros({routing_weights.size(0), num_experts}, routing_weights.options());
    weights_idx.scatter_add_(1, selected, routing_weights);
    at::Tensor tokens_weight = weights_idx.t().contiguous().masked_select(routing_map.to(at::kBool));
    at::Tensor tokens = home * tokens_weight.unsqueeze(-1);
    at::Tensor out = at::zeros({m, n}, tokens.options());
    out.scatter_add_(0, perm.unsqueeze(1).expand({-1, n}), tokens);
    return {out};
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
