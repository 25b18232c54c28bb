// Expert-parallel fused MoE forward with LoRA adapters: the fused MoE of
// blocks/fused_moe.h (problem 31's router, dispatch and combine, 8 experts
// whatever W), where each of the three expert projections gets an un-scaled
// rank-8 LoRA term (x A^T) B^T. Every local expert of a rank uses that rank's
// same projections and adapters.
#include "../blocks/fused_moe.h"

namespace {

const pkb::ProblemSpec kSpec{32, "fused_moe_fwd_lora",
                             "Same EP MoE forward as 31 with un-scaled LoRA adapters on all three expert projections",
                             "Expert Parallel", "LoRA variant of the VeOmni / Megatron-LM style fused MoE (problem 31)",
                             "W divides 8"};

using namespace pkb::blocks;

constexpr int64_t kLoraRank = 8;

class FusedMoeFwdLora : public pkb::ProblemWithSpec<kSpec, FusedMoeForward> {
 public:
  // Inputs: add_router_and_experts, then the six LoRA factors from the
  // device's generator (lora_gate_A, lora_gate_B, lora_up_A, lora_up_B,
  // lora_down_A, lora_down_B), then num_experts, top_k, group.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in;
    add_router_and_experts(in, req, 32);
    const auto opts = req.options();
    in.add("lora_gate_A", at::randn({kLoraRank, req.n}, opts));
    in.add("lora_gate_B", at::randn({kInterDim, kLoraRank}, opts));
    in.add("lora_up_A", at::randn({kLoraRank, req.n}, opts));
    in.add("lora_up_B", at::randn({kInterDim, kLoraRank}, opts));
    in.add("lora_down_A", at::randn({kLoraRank, kInterDim}, opts));
    in.add("lora_down_B", at::randn({req.n, kLoraRank}, opts));
    add_routing_args(in);
    return in;
  }

  // blocks/fused_moe.h's mean-load model, plus the LoRA factors read
  // (3 x 8 x (N + 128)) and their FLOPs 2·R·(2·8·N + 2·8·128 + 8·128 + 8·N)
  // with the three adds 2·R·128 + R·N.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& h = in.tensor(0);
    const double n = static_cast<double>(h.size(1)), r = 2.0 * static_cast<double>(h.size(0));
    const double lora = 2.0 * r * (2.0 * kLoraRank * n + 2.0 * kLoraRank * kInterDim + kLoraRank * kInterDim +
                                   kLoraRank * n) + 2.0 * r * kInterDim + r * n;
    return fused_moe_cost(world, in, 3.0 * kLoraRank * (n + kInterDim), lora);
  }

 protected:
  // The expert MLP with LoRA, every step a bfloat16 op in the published order:
  // g = gate(x) + (x A_g^T) B_g^T, u = up(x) + (x A_u^T) B_u^T, y = silu(g) * u,
  // out = down(y) + (y A_d^T) B_d^T. No alpha/r scaling.
  at::Tensor expert(const at::Tensor& x, const pkb::Inputs& in) const override {
    at::Tensor xa_g = at::linear(x, in.tensor(9));
    at::Tensor gate_x = at::linear(x, in.tensor(3), in.tensor(4)) + at::linear(xa_g, in.tensor(10));
    at::Tensor gate = at::silu(gate_x);
    at::Tensor xa_u = at::linear(x, in.tensor(11));
    at::Tensor up = at::linear(x, in.tensor(5), in.tensor(6)) + at::linear(xa_u, in.tensor(12));
    at::Tensor y = gate * up;
    at::Tensor xa_d = at::linear(y, in.tensor(13));
    return at::linear(y, in.tensor(7), in.tensor(8)) + at::linear(xa_d, in.tensor(14));
  }
  size_t count_arg() const override { return 15; }
};

}  // namespace

PKB_PROBLEM(FusedMoeFwdLora)
