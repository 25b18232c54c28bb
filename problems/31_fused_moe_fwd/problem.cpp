// Expert-parallel fused MoE forward, the published "BASE case": the fused
// MoE of blocks/fused_moe.h (router softmax/top-2, permutation, all-to-all-v
// dispatch and combine, weighted unpermute) with the SiLU-gated MLP.
#include "../blocks/fused_moe.h"

namespace {

using namespace pkb::blocks;

class FusedMoeFwd : public FusedMoeForward {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{31, "fused_moe_fwd",
                                    "Expert-parallel MoE forward: router softmax/top-2, permute, all-to-all "
                                    "dispatch, SiLU-gated MLP, all-to-all combine, weighted unpermute",
                                    "Expert Parallel",
                                    "VeOmni / Megatron-LM MoE all-to-all token dispatcher (published BASE case)",
                                    "W divides 8"};
    return s;
  }

  // Inputs: add_router_and_experts, then num_experts, top_k, group.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in;
    add_router_and_experts(in, req, 31);
    add_routing_args(in);
    return in;
  }

  // Routing is data dependent; the model takes the mean load, R = 2M routed
  // rows per rank, (W-1)/W of them remote. NVLink: the dispatch and the
  // combine all-to-all each move (W-1)/W x 2M x N elements, plus the
  // all-gather of 8 int64 counts from each of W-1 peers. HBM: hidden read,
  // the R rows read by the experts and their R outputs written, the weights
  // read (3 x 128 x N + biases), the output written. FLOPs: router 2·M·N·8,
  // experts 3 x 2·R·N·128 plus the gate product, combine 2·R·N.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& h = in.tensor(0);
    const double m = static_cast<double>(h.size(0)), n = static_cast<double>(h.size(1));
    const double e = static_cast<double>(h.element_size()), w = world, r = 2.0 * m;
    const double weights = 3.0 * kInterDim * n + 2.0 * kInterDim + n;
    pkb::Cost c;
    c.nvlink_bytes_per_rank = 2.0 * (w - 1) / w * r * n * e + (w - 1) * kNumExperts * 8.0;
    c.hbm_bytes_per_rank = (m * n + 2.0 * r * n + weights + m * n) * e;
    c.flops_per_rank = 2.0 * m * n * kNumExperts + 3.0 * 2.0 * r * n * kInterDim + r * kInterDim + 2.0 * r * n;
    return c;
  }

 protected:
  // The expert MLP, every step a bfloat16 op: down(b(silu(gate(x))) * up(x)).
  at::Tensor expert(const at::Tensor& x, const pkb::Inputs& in) const override {
    at::Tensor gate = at::silu(at::linear(x, in.tensor(3), in.tensor(4)));
    at::Tensor up = at::linear(x, in.tensor(5), in.tensor(6));
    return at::linear(gate * up, in.tensor(7), in.tensor(8));
  }
  size_t count_arg() const override { return 9; }
};

}  // namespace

PKB_PROBLEM(FusedMoeFwd)
