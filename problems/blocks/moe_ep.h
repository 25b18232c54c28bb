// The expert-parallel MoE forward of 49-51 (VeOmni / Megatron-LM MoE token
// dispatcher, all-to-all variant; same kernel as problem 31): router (linear
// + softmax + top-k, weights not renormalised), Megatron-style permutation
// (expert-major, tokens ascending), an all-gather of per-expert token counts,
// an all-to-all-v dispatch, regrouping by local expert, the expert SiLU-GLU
// MLP (this rank's three nn.Linear layers, shared by all its local experts),
// the inverse regrouping, the all-to-all-v combine, and the weighted
// scatter-add back into token order. The problems differ in the expert count
// (num_experts, top_k) and the EP group their reference passes.
//
// The published reference's ops are kept in order and dtype: F.linear
// (addmm), softmax in bf16, topk, one_hot masks, masked_select/index_select
// permutation, torch.split/cat regrouping, bf16 routing-weight product and
// scatter_add_. A group of size 1 skips the all-to-alls (as published).
#pragma once

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "../blocks/moe_token_dispatcher.h"
#include "pkb/problem.h"

namespace pkb::blocks {

constexpr int64_t kMoeInterDim = 128;

// nn.Linear(in, out) on the CPU generator, float32, then cast: weight by
// kaiming_uniform_(a = sqrt(5)), bias by U(-1/sqrt(in), 1/sqrt(in)).
inline std::pair<at::Tensor, at::Tensor> nn_linear(int64_t in, int64_t out, at::Generator& gen, const at::TensorOptions& to) {
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1.0 + std::pow(a, 2.0)));
  const double bound_w = std::sqrt(3.0) * (gain / std::sqrt(static_cast<double>(in)));
  const double bound_b = 1.0 / std::sqrt(static_cast<double>(in));
  at::Tensor w = at::empty({out, in}, at::kFloat).uniform_(-bound_w, bound_w, gen);
  at::Tensor b = at::empty({out}, at::kFloat).uniform_(-bound_b, bound_b, gen);
  return {w.to(to), b.to(to)};
}

class ExpertParallelMoe : public Problem {
 public:
  // seed(id, rank, trial): hidden_states, gate_weight, gate_bias randn on the
  // device, then three nn.Linear layers on the CPU generator (fresh after the
  // seed, so a generator of its own seeded alike), cast and moved.
  Inputs make_inputs(const InputRequest& req) const override {
    auto opts = req.options();
    const int64_t experts = num_experts(req.world), n = req.n;
    Inputs in{{"hidden_states", at::randn({req.m, n}, opts)}, {"gate_weight", at::randn({experts, n}, opts)},
              {"gate_bias", at::randn({experts}, opts)}};
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(req.seed);
    const char* names[3] = {"gate_proj", "up_proj", "down_proj"};
    for (int i = 0; i < 3; ++i) {
      auto [w, b] = i < 2 ? nn_linear(n, kMoeInterDim, gen, opts) : nn_linear(kMoeInterDim, n, gen, opts);
      in.add(std::string(names[i]) + ".weight", w);
      in.add(std::string(names[i]) + ".bias", b);
    }
    in.add("num_experts", experts);
    in.add("top_k", top_k(experts));
    in.add("group", None{});
    return in;
  }

  // Per rank, T tokens of N bf16 (e = 2), k = top_k, I = 128, EP group of G
  // ranks (G = W here; E when E < W): NVLink k·T·N·e sent by the dispatch and
  // received back by the combine, (G-1)/G of it remote on average with
  // uniform routing: 2·(G-1)/G·k·T·N·e, plus the count all-gather (G·E·8
  // bytes); HBM: hidden read (router and permute),
  // permuted rows written/read twice each way, expert weights read, output
  // written, ~ (2 + 8k)·T·N·e + 3·I·N·e; FLOPs: router 2·T·N·E, experts
  // 6·N·I per received row (≈ k·T rows), combine 2·k·T·N.
  Cost cost(int world, const Inputs& in) const override {
    const at::Tensor& h = in.tensor(0);
    const double t = static_cast<double>(h.size(0)), n = static_cast<double>(h.size(1));
    const double e = static_cast<double>(h.element_size()), w = world;
    const double experts = static_cast<double>(in.integer(9)), k = static_cast<double>(in.integer(10));
    const double ep = std::min(w, experts);  // EP group: E contiguous ranks (the world if E >= W)
    return {/*nvlink_bytes_per_rank=*/2.0 * (ep - 1) / ep * k * t * n * e + ep * experts * 8.0,
            /*hbm_bytes_per_rank=*/(2.0 + 8.0 * k) * t * n * e + 3.0 * kMoeInterDim * n * e,
            /*flops_per_rank=*/2.0 * t * n * experts + 6.0 * n * kMoeInterDim * k * t + 2.0 * k * t * n};
  }

 protected:
  virtual int64_t num_experts(int64_t world) const = 0;
  virtual int64_t top_k(int64_t experts) const { return 2; }

  static at::Tensor expert_forward(const at::Tensor& x, const Inputs& in) {
    at::Tensor gate = at::silu(at::linear(x, in.tensor(3), in.tensor(4)));
    at::Tensor up = at::linear(x, in.tensor(5), in.tensor(6));
    return at::linear(gate * up, in.tensor(7), in.tensor(8));
  }

  // 49 and 50: the group argument is None or a group of every rank, the
  // world either way.
  static at::Tensor moe_forward_on_world(Collectives& comm, const Inputs& in) {
    PKB_CHECK(std::holds_alternative<None>(in.at(11).value) ||
                  (std::holds_alternative<GroupRanks>(in.at(11).value) &&
                   static_cast<int>(in.group(11).ranks.size()) == comm.world_size()),
              "group must be None (the world)");
    return moe_forward(comm, kWorld, in);
  }

  static at::Tensor moe_forward(Collectives& comm, Group group, const Inputs& in) {
    const at::Tensor& hs = in.tensor(0);
    const int64_t experts = in.integer(9), top_k = in.integer(10);
    at::Tensor h = hs.reshape({-1, hs.size(-1)});
    const int64_t ep = comm.world_size(group);
    PKB_CHECK(experts % ep == 0, "num_experts (", experts, ") must be a multiple of the EP size (", ep, ")");
    // Router.
    at::Tensor logits = at::linear(h, in.tensor(1), in.tensor(2));
    auto [weights, selected] = at::topk(at::softmax(logits, -1), top_k, -1);
    return dispatch_and_combine(comm, group, h, weights, selected, experts,
                                [&](const at::Tensor& grouped) { return expert_forward(grouped, in); });
  }
};

}  // namespace pkb::blocks
