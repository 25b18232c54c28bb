// The expert-parallel fused MoE forward of 31 and 32 (the published "BASE
// case" and its LoRA variant): router (softmax, top-2) -> expert-major
// permutation -> all-to-all-v dispatch -> the problem's expert MLP ->
// all-to-all-v combine -> weighted unpermute. 8 experts whatever W (8/W local
// experts per rank); every local expert of a rank uses that rank's same
// projections. The dispatcher is VeOmni's / Megatron-LM's all-to-all token
// dispatcher (preprocess, permute, sort_chunks_by_idxs, unpermute), step for
// step.
#pragma once

#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "../blocks/cpu_order_on_replay.h"
#include "../blocks/moe_routing.h"
#include "../blocks/moe_token_dispatcher.h"
#include "pkb/problem.h"

namespace pkb::blocks {

constexpr int64_t kInterDim = 128;

// torch.nn.Linear(in, out) as built by the published input generator: on the
// CPU in float32 with the default init (kaiming_uniform_(a = sqrt(5)) for the
// weight, U(-1/sqrt(in), 1/sqrt(in)) for the bias), drawn from the CPU
// generator even when the other inputs come from the GPU's, then cast.
inline std::pair<at::Tensor, at::Tensor> default_linear(int64_t in, int64_t out, const pkb::InputRequest& req) {
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1.0 + std::pow(a, 2)));
  const double bound = std::sqrt(3.0) * (gain / std::sqrt(static_cast<double>(in)));
  at::Tensor w = at::empty({out, in}, at::TensorOptions().dtype(at::kFloat)).uniform_(-bound, bound);
  const double bias_bound = 1.0 / std::sqrt(static_cast<double>(in));
  at::Tensor b = at::empty({out}, at::TensorOptions().dtype(at::kFloat)).uniform_(-bias_bound, bias_bound);
  return {w.to(req.device, req.dtype), b.to(req.device, req.dtype)};
}

// torch.topk over the 8 router probabilities. Its tie-break is part of the
// result: when the k-th and (k+1)-th probabilities are equal in bfloat16,
// CUDA's topk keeps the values above the k-th one and then the tied ones in
// ascending index order (its radix-select gather), while the CPU topk may
// keep another (in every tie measured, the higher) index (recorded fixture, W = 2, rank 0, token 115: experts 3 and
// 5 tie; CUDA kept 3, the CPU topk keeps 5, and that token's output moves by
// 0.025). The contract is CUDA's, on every device: on the CPU a stable
// descending sort cut at k selects the same set. Only the set matters
// downstream (the order of the k picks is summed away). A tie changes the
// output only when the tied experts live on different ranks (each rank has
// its own projections), which is why W = 8 (one expert per rank) meets it
// most. `cpu_order`: the CPU topk itself, for replaying the Gloo recordings
// (NOTE [recording device] in pkb/published_on.h).
inline std::tuple<at::Tensor, at::Tensor> router_topk(const at::Tensor& probs, int64_t k, bool cpu_order) {
  if (cpu_order) {
    auto [values, indices] = at::topk(probs.cpu(), k, -1);
    return {values.to(probs.device()), indices.to(probs.device())};
  }
  if (probs.is_cuda()) return at::topk(probs, k, -1);
  auto [values, indices] = at::sort(probs, /*stable=*/true, /*dim=*/-1, /*descending=*/true);
  return {values.narrow(-1, 0, k).contiguous(), indices.narrow(-1, 0, k).contiguous()};
}

// Routing is data dependent; the model takes the mean load, R = 2M routed
// rows per rank, (W-1)/W of them remote. NVLink: the dispatch and the
// combine all-to-all each move (W-1)/W x 2M x N elements, plus the
// all-gather of 8 int64 counts from each of W-1 peers. HBM: hidden read,
// the R rows read by the experts and their R outputs written, the weights
// read (3 x 128 x N + biases, and `extra_weights` more), the output written.
// FLOPs: router 2·M·N·8, experts 3 x 2·R·N·128 plus the gate product and
// `extra_flops`, combine 2·R·N.
inline Cost fused_moe_cost(int world, const Inputs& in, double extra_weights = 0.0, double extra_flops = 0.0) {
  const at::Tensor& h = in.tensor(0);
  const double m = static_cast<double>(h.size(0)), n = static_cast<double>(h.size(1));
  const double e = static_cast<double>(h.element_size()), w = world, r = 2.0 * m;
  const double weights = 3.0 * kInterDim * n + 2.0 * kInterDim + n + extra_weights;
  return {/*nvlink_bytes_per_rank=*/2.0 * (w - 1) / w * r * n * e + (w - 1) * kNumExperts * 8.0,
          /*hbm_bytes_per_rank=*/(m * n + 2.0 * r * n + weights + m * n) * e,
          /*flops_per_rank=*/2.0 * m * n * kNumExperts + 3.0 * 2.0 * r * n * kInterDim + r * kInterDim + extra_flops +
              2.0 * r * n};
}

class FusedMoeForward : public CpuOrderOnReplay {
 public:
  std::string check_world(int world) const override { return moe_experts_check(world); }

 protected:
  // RNG order as published: hidden_states, gate_weight, gate_bias from the
  // device's generator, then the three nn.Linear modules (weight, bias each)
  // from the CPU generator; added in that order as hidden_states,
  // gate_weight, gate_bias, gate_proj.weight, gate_proj.bias, up_proj.weight,
  // up_proj.bias, down_proj.weight, down_proj.bias.
  static void add_router_and_experts(Inputs& in, const InputRequest& req, int problem) {
    PKB_CHECK(kNumExperts % req.world == 0, "problem ", problem, " needs W to divide the 8 experts (W = ", req.world,
              ")");
    const auto opts = req.options();
    at::Tensor hidden = at::randn({req.m, req.n}, opts);
    at::Tensor gate_weight = at::randn({kNumExperts, req.n}, opts);
    at::Tensor gate_bias = at::randn({kNumExperts}, opts);
    auto gate_proj = default_linear(req.n, kInterDim, req);
    auto up_proj = default_linear(req.n, kInterDim, req);
    auto down_proj = default_linear(kInterDim, req.n, req);
    in.add("hidden_states", hidden);
    in.add("gate_weight", gate_weight);
    in.add("gate_bias", gate_bias);
    in.add("gate_proj.weight", gate_proj.first);
    in.add("gate_proj.bias", gate_proj.second);
    in.add("up_proj.weight", up_proj.first);
    in.add("up_proj.bias", up_proj.second);
    in.add("down_proj.weight", down_proj.first);
    in.add("down_proj.bias", down_proj.second);
  }

  // num_experts, top_k, group: the arguments after the problem's tensors.
  static void add_routing_args(Inputs& in) {
    in.add("num_experts", kNumExperts);
    in.add("top_k", kTopK);
    in.add("group", None{});
  }

  // The expert MLP on the grouped rows (every local expert alike).
  virtual at::Tensor expert(const at::Tensor& x, const Inputs& in) const = 0;
  // The index of num_experts (top_k follows).
  virtual size_t count_arg() const = 0;

 private:
  Outputs forward(Collectives& comm, const Inputs& in, bool cpu_order) const override {
    const at::Tensor& hidden_in = in.tensor(0);
    const int64_t num_experts = in.integer(count_arg()), top_k = in.integer(count_arg() + 1);
    at::Tensor hidden = hidden_in.reshape({-1, hidden_in.size(-1)});
    // Router: one addmm, a bfloat16 softmax, top-k (not renormalised).
    at::Tensor logits = at::linear(hidden, in.tensor(1), in.tensor(2));
    auto [routing_weights, selected] = router_topk(at::softmax(logits, -1), top_k, cpu_order);
    return {dispatch_and_combine(comm, kWorld, hidden, routing_weights, selected, num_experts,
                                 [&](const at::Tensor& grouped) { return expert(grouped, in); })};
  }
};

}  // namespace pkb::blocks
