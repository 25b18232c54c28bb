// Megatron-LM's all-to-all MoE token dispatcher (moe/token_dispatcher.py, as
// VeOmni calls it), step for step: permute tokens expert-major, all-to-all-v
// the rows, regroup the received chunks by local expert, and back again
// (unpermute with the routing weights). 28 is the dispatch half, 29 the
// combine half, and 31/32 (fused_moe.h) and 49-51 (moe_ep.h) run both around
// their expert MLP. A group of size 1 skips the all-to-alls (as published).
#pragma once

#include <utility>
#include <vector>

#include "host_list.h"
#include "pkb/problem.h"

namespace pkb::blocks {

inline int64_t sum_of(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// _AllToAll.forward: a fresh (sum(out_splits), N) tensor; in a group of one
// the input itself.
inline at::Tensor all_to_all_rows(Collectives& comm, const at::Tensor& input, const std::vector<int64_t>& out_splits,
                                  const std::vector<int64_t>& in_splits, Group g = kWorld) {
  at::Tensor x = input.contiguous();
  if (comm.world_size(g) == 1) return x;
  at::Tensor out = at::empty({sum_of(out_splits), x.size(1)}, x.options());
  comm.all_to_all_single(out, x, out_splits, in_splits, g);
  return out;
}

// torch.cat([torch.split(x, sizes)[i] for i in order]).
inline at::Tensor sort_chunks_by_idxs(const at::Tensor& input, const std::vector<int64_t>& sizes,
                                      const std::vector<int64_t>& order) {
  std::vector<at::Tensor> chunks = input.split_with_sizes(sizes, 0);
  std::vector<at::Tensor> picked;
  for (int64_t i : order) picked.push_back(chunks[i]);
  return at::cat(picked, 0);
}

// `per_local` (W, L) counts the rows rank `src` sends local expert `le`: the
// received chunks, (source, local expert)-major, regrouped (local expert,
// source)-major for the experts ...
inline at::Tensor chunks_by_local_expert(const at::Tensor& rows, const at::Tensor& per_local) {
  const int64_t world = per_local.size(0), local = per_local.size(1);
  std::vector<int64_t> order;
  for (int64_t le = 0; le < local; ++le)
    for (int64_t src = 0; src < world; ++src) order.push_back(src * local + le);
  return sort_chunks_by_idxs(rows, host_list(per_local), order);
}

// ... and the experts' outputs put back (source, local expert)-major.
inline at::Tensor chunks_by_source(const at::Tensor& rows, const at::Tensor& per_local) {
  const int64_t world = per_local.size(0), local = per_local.size(1);
  std::vector<int64_t> order;
  for (int64_t src = 0; src < world; ++src)
    for (int64_t le = 0; le < local; ++le) order.push_back(le * world + src);
  return sort_chunks_by_idxs(rows, host_list(per_local.t()), order);
}

// permute: the token ids of the routing map (E, T), expert-major and
// ascending within an expert; index_select by them gives the rows to send.
inline at::Tensor expert_major_token_ids(const at::Tensor& routing_map) {
  return at::arange(routing_map.size(1), routing_map.options().dtype(at::kLong))
      .unsqueeze(0)
      .expand({routing_map.size(0), -1})
      .masked_select(routing_map.to(at::kBool));
}

inline void check_split_rows(const std::vector<int64_t>& input_splits, const at::Tensor& permuted) {
  const int64_t expected = sum_of(input_splits);
  PKB_CHECK(expected == permuted.size(0), "EP split mismatch: input_splits sum (", expected, ") != permuted tokens (",
            permuted.size(0), ")");
}

// unpermute: the rows back home, each times its token's routing weight for
// that expert, scatter-added into (num_tokens, N) token order.
inline at::Tensor unpermute(const at::Tensor& rows, const at::Tensor& routing_weights, const at::Tensor& selected,
                            const at::Tensor& routing_map, const at::Tensor& token_ids, int64_t num_tokens) {
  const int64_t n = rows.size(1);
  at::Tensor weights_idx = at::zeros({routing_weights.size(0), routing_map.size(0)}, routing_weights.options());
  weights_idx.scatter_add_(1, selected, routing_weights);
  at::Tensor tokens_weight = weights_idx.t().contiguous().masked_select(routing_map.to(at::kBool));
  at::Tensor tokens = rows * tokens_weight.unsqueeze(-1);
  at::Tensor out = at::zeros({num_tokens, n}, tokens.options());
  out.scatter_add_(0, token_ids.unsqueeze(1).expand({-1, n}), tokens);
  return out;
}

// _preprocess: the rows this rank sends each peer (from its per-expert
// counts), the all-gathered counts of its local experts (W, L), and the rows
// it receives from each peer.
struct DispatchSizes {
  std::vector<int64_t> input_splits;
  at::Tensor per_local;
  std::vector<int64_t> output_splits;
};

inline DispatchSizes dispatch_sizes(Collectives& comm, const at::Tensor& expert_mask, Group g = kWorld) {
  const int64_t world = comm.world_size(g), rank = comm.rank(g);
  const int64_t experts = expert_mask.size(0), local = experts / world;
  at::Tensor counts = expert_mask.sum(at::IntArrayRef{1, 2});  // (E,) int64
  std::vector<int64_t> input_splits = host_list(counts.reshape({world, local}).sum(1));
  at::Tensor counts_flat = counts.contiguous().view(-1);
  at::Tensor global_counts = at::empty({world * counts_flat.numel()}, counts_flat.options());
  if (world == 1) {
    global_counts.copy_(counts_flat);
  } else {
    comm.all_gather_into_tensor(global_counts, counts_flat, g);
  }
  at::Tensor per_local = global_counts.view({world, experts}).narrow(1, rank * local, local).contiguous();
  std::vector<int64_t> output_splits = host_list(per_local.sum(1));
  return {std::move(input_splits), per_local, std::move(output_splits)};
}

// The whole dispatcher around `expert` (the grouped rows -> their outputs),
// from the router's top-k picks of `hidden` (T, N): the (T, N) output.
template <class Expert>
at::Tensor dispatch_and_combine(Collectives& comm, Group g, const at::Tensor& hidden, const at::Tensor& routing_weights,
                                const at::Tensor& selected, int64_t num_experts, Expert&& expert) {
  at::Tensor expert_mask = at::one_hot(selected, num_experts).permute({2, 1, 0});  // (E, K, T) int64
  const DispatchSizes sizes = dispatch_sizes(comm, expert_mask, g);
  at::Tensor routing_map = expert_mask.sum(1);  // (E, T) int64
  at::Tensor token_ids = expert_major_token_ids(routing_map);
  at::Tensor permuted = hidden.index_select(0, token_ids);
  check_split_rows(sizes.input_splits, permuted);
  at::Tensor dispatched = all_to_all_rows(comm, permuted, sizes.output_splits, sizes.input_splits, g);
  at::Tensor expert_outputs = expert(chunks_by_local_expert(dispatched, sizes.per_local));
  at::Tensor regrouped = chunks_by_source(expert_outputs, sizes.per_local);
  at::Tensor home = all_to_all_rows(comm, regrouped, sizes.input_splits, sizes.output_splits, g);
  return unpermute(home, routing_weights, selected, routing_map, token_ids, hidden.size(0));
}

}  // namespace pkb::blocks
