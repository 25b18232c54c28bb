// MoE token-dispatcher preprocessing (VeOmni / Megatron-LM `preprocess`): the
// per-expert token counts of this rank give the all-to-all input splits, an
// all-gather of the counts gives the output splits and the per-local-expert
// token counts. As published, the four outputs live on the CPU (the splits
// pass through Python lists; the two count tensors are copied non-blocking).
#include "../blocks/moe_routing.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{26, "moe_token_preprocess",
                             "MoE all-to-all split-size computation (counts per expert, all-gather of counts)",
                             "Expert Parallel", "VeOmni / Megatron-LM MoE token dispatcher (preprocess)",
                             "W divides 8"};

using namespace pkb::blocks;

class MoeTokenPreprocess : public pkb::ProblemWithSpec<kSpec> {
 public:
  std::string check_world(int world) const override { return moe_experts_check(world); }

  // Each token picks 2 experts uniformly at random (repeats allowed); the mask
  // is fp32 whatever the run's dtype, and a permuted (non-contiguous) view of
  // the (M, 2, 8) one-hot, as published.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    at::Tensor selected = at::randint(0, kNumExperts, {req.m, kTopK}, req.options(at::kLong));
    at::Tensor expert_mask = at::one_hot(selected, kNumExperts).to(at::kFloat).permute({2, 1, 0});
    return {{"expert_mask", expert_mask}, {"num_experts", kNumExperts}, {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& expert_mask = in.tensor(0);
    const int64_t num_experts = in.integer(1);
    const int64_t world = comm.world_size(), rank = comm.rank();
    const int64_t local_experts = num_experts / world;
    at::Tensor per_expert = expert_mask.sum({1, 2});
    // fp32 counts -> Python floats -> int64 tensor on the CPU.
    at::Tensor input_splits = per_expert.reshape({world, local_experts}).sum(1).cpu().to(at::kLong);
    at::Tensor global = at::empty({world, per_expert.size(0)}, per_expert.options());
    comm.all_gather_into_tensor(global, per_expert);
    at::Tensor per_local = global.narrow(1, rank * local_experts, local_experts).contiguous();
    at::Tensor output_splits = per_local.sum(1).cpu().to(at::kLong);
    at::Tensor sum_per_local = per_local.sum(0).cpu();
    return {input_splits, output_splits, per_local.view({-1, local_experts}).cpu(), sum_per_local};
  }

  // An all-gather of 8 fp32 counts ((W-1) x 32 B in); the mask is read once;
  // one add per mask element.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& mask = in.tensor(0);
    const double w = world, counts_bytes = static_cast<double>(mask.size(0)) * 4.0;
    return {/*nvlink_bytes_per_rank=*/(w - 1) * counts_bytes,
            /*hbm_bytes_per_rank=*/static_cast<double>(mask.numel()) * mask.element_size(),
            /*flops_per_rank=*/static_cast<double>(mask.numel())};
  }
};

}  // namespace

PKB_PROBLEM(MoeTokenPreprocess)
