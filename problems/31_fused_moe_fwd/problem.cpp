// Expert-parallel fused MoE forward, the published "BASE case": the fused
// MoE of blocks/fused_moe.h (router softmax/top-2, permutation, all-to-all-v
// dispatch and combine, weighted unpermute) with the SiLU-gated MLP.
#include "../blocks/fused_moe.h"

namespace {

const pkb::ProblemSpec kSpec{31, "fused_moe_fwd",
                             "Expert-parallel MoE forward: router softmax/top-2, permute, all-to-all dispatch, "
                             "SiLU-gated MLP, all-to-all combine, weighted unpermute",
                             "Expert Parallel",
                             "VeOmni / Megatron-LM MoE all-to-all token dispatcher (published BASE case)",
                             "W divides 8"};

using namespace pkb::blocks;

class FusedMoeFwd : public pkb::ProblemWithSpec<kSpec, FusedMoeForward> {
 public:
  // Inputs: add_router_and_experts, then num_experts, top_k, group.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in;
    add_router_and_experts(in, req, 31);
    add_routing_args(in);
    return in;
  }

  // blocks/fused_moe.h's mean-load model.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override { return fused_moe_cost(world, in); }

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
