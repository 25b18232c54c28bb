// Expert-parallel fused MoE forward with LoRA adapters: the fused MoE of
// blocks/fused_moe.h (problem 31's router, dispatch and combine, 8 experts
// whatever W), where each of the three expert projections gets an un-scaled
// rank-8 LoRA term (x A^T) B^T. Every local expert of a rank uses that rank's
// same projections and adapters.
#include "../blocks/fused_moe.h"

namespace {

using namespace pkb::blocks;

constexpr int64_t kLoraRank = 8;

class FusedMoeFwdLora : public FusedMoeForward {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{32, "fused_moe_fwd_lora",
                                    "Same EP MoE forward as 31 with un-scaled LoRA adapters on all three expert "
                                    "projections",
                                    "Expert Parallel",
                                    "LoRA variant of the VeOmni / Megatron-LM style fused MoE (problem 31)",
                                    "W divides 8"};
    return s;
  }

  // Inputs: add_router_and_experts, then the six LoRA factors from the
  // device's generator (lora_gate_A, lora_gate_B, lora_up_A, lora_up_B,
  // lora_down_A, lora_down_B), then num_experts, top_k, group.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in;
    add_router_and_experts(in, req, 32);
    const auto opts = at::TensorOptions().dtype(req.dtype).device(req.device);
    in.add("lora_gate_A", at::randn({kLoraRank, req.n}, opts));
    in.add("lora_gate_B", at::randn({kInterDim, kLoraRank}, opts));
    in.add("lora_up_A", at::randn({kLoraRank, req.n}, opts));
    in.add("lora_up_B", at::randn({kInterDim, kLoraRank}, opts));
    in.add("lora_down_A", at::randn({kLoraRank, kInterDim}, opts));
    in.add("lora_down_B", at::randn({req.n, kLoraRank}, opts));
    add_routing_args(in);
    return in;
  }

  // Routing is data dependent; the model takes the mean load, R = 2M routed
  // rows per rank, (W-1)/W of them remote. NVLink: the dispatch and the
  // combine all-to-all each move (W-1)/W x 2M x N elements, plus the
  // all-gather of 8 int64 counts from each of W-1 peers. HBM: hidden read,
  // the R rows read by the experts and their R outputs written, the weights
  // and LoRA factors read (3 x 128 x N + biases + 3 x 8 x (N + 128)), the
  // output written. FLOPs: router 2·M·N·8, experts 3 x 2·R·N·128 plus the
  // gate product, LoRA 2·R·(2·8·N + 2·8·128 + 8·128 + 8·N) plus the three
  // adds 2·R·128 + R·N, combine 2·R·N.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& h = in.tensor(0);
    const double m = static_cast<double>(h.size(0)), n = static_cast<double>(h.size(1));
    const double e = static_cast<double>(h.element_size()), w = world, r = 2.0 * m;
    const double weights = 3.0 * kInterDim * n + 2.0 * kInterDim + n + 3.0 * kLoraRank * (n + kInterDim);
    pkb::Cost c;
    c.nvlink_bytes_per_rank = 2.0 * (w - 1) / w * r * n * e + (w - 1) * kNumExperts * 8.0;
    c.hbm_bytes_per_rank = (m * n + 2.0 * r * n + weights + m * n) * e;
    const double lora = 2.0 * r * (2.0 * kLoraRank * n + 2.0 * kLoraRank * kInterDim + kLoraRank * kInterDim +
                                   kLoraRank * n) + 2.0 * r * kInterDim + r * n;
    c.flops_per_rank =
        2.0 * m * n * kNumExperts + 3.0 * 2.0 * r * n * kInterDim + r * kInterDim + lora + 2.0 * r * n;
    return c;
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
