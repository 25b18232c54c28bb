// MoE router load-balancing loss (HF transformers load_balancing_loss_func),
// then a mean over data-parallel ranks. Ties between bf16 probabilities are
// common and are broken by at::topk, as in the published reference (catalog
// §0.6, §24); each tie moves the loss by ~1e-5 only.
#include "pkb/integrity.h"
#include "pkb/problem.h"

#include <variant>

namespace {

const pkb::ProblemSpec kSpec{24, "load_balancing_loss_fn",
                             "MoE router load-balancing auxiliary loss, averaged over ranks", "Expert Parallel",
                             "HF transformers load_balancing_loss_func (Mixtral / Qwen-MoE)", "any"};

class LoadBalancingLoss : public pkb::ProblemWithSpec<kSpec> {
 public:
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    return {{"gate_logits", at::randn({req.m, kNumExperts}, opts)}, {"num_experts", kNumExperts}, {"top_k", int64_t{2}},
            {"attention_mask", pkb::None{}}};
  }

  // Integrity trials (NOTE [integrity trials], pkb/integrity.h): with i.i.d.
  // Gaussian logits the loss concentrates near its balanced value (a re-draw
  // stays inside the tolerance), so a cached or rank-only loss would pass.
  // Here each trial and rank adds a per-expert bias and a temperature, so the
  // routing is unbalanced by a different amount every time.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = make_inputs(req);
    const at::Tensor& logits = in.tensor(0);
    at::Tensor bias = at::randn({1, logits.size(1)}, logits.options().dtype(at::kFloat)) * 2.0;
    const double temperature = 0.5 + 2.0 * at::rand({1}, at::kDouble).item<double>();
    in.args()[0].value = (logits.to(at::kFloat) * temperature + bias).to(logits.scalar_type());
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& gate_logits = in.tensor(0);
    const int64_t num_experts = in.integer(1), top_k = in.integer(2);
    // The published masked branch is never exercised by the harness's inputs.
    PKB_CHECK(std::holds_alternative<pkb::None>(in.at(3).value), "attention_mask must be None");
    at::Tensor routing_weights = at::softmax(gate_logits, -1);
    at::Tensor selected = std::get<1>(at::topk(routing_weights, top_k, -1));
    at::Tensor expert_mask = at::one_hot(selected, num_experts);
    at::Tensor tokens_per_expert = at::mean(expert_mask.to(at::kFloat), 0);
    at::Tensor router_prob = at::mean(routing_weights, 0);
    at::Tensor loss = at::sum(tokens_per_expert * router_prob.unsqueeze(0));
    loss = loss * num_experts;
    comm.all_reduce(loss, pkb::ReduceOp::kSum);
    // Tensor / Python int: on CUDA a multiplication by fl32(1/W), as published.
    loss = loss / comm.world_size();
    return {loss};
  }

  // One all-reduce of one fp32 (2(W-1)/W of it each way); the logits read
  // once; ~50 flops per token (softmax, top-2, one-hot means, router means).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& logits = in.tensor(0);
    const double w = world, m = static_cast<double>(logits.size(0));
    return {/*nvlink_bytes_per_rank=*/2.0 * (w - 1) / w * 4.0,
            /*hbm_bytes_per_rank=*/static_cast<double>(logits.nbytes()) + 4.0,
            /*flops_per_rank=*/50.0 * m};
  }

 private:
  static constexpr int64_t kNumExperts = 8;
};

}  // namespace

PKB_PROBLEM(LoadBalancingLoss)
