// The backward of a LoRA shared by all experts of an EP group-GEMM (VeOmni):
// the three LoRA factor gradients are summed over the group. As published the
// all-reduces run in place on the inputs, in argument order, and the mutated
// inputs are returned; the bf16 sums use the collective's own rounding order.
#include "../blocks/exchange_cost.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{30, "moe_epgroupgemm_lora_backward",
                             "In-place sum all-reduce of three LoRA gradient tensors (shared LoRA across experts)",
                             "Expert Parallel", "VeOmni EP group-GEMM LoRA backward", "any"};

constexpr int64_t kLoraRank = 8;

class MoeEpGroupGemmLoraBackward : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published: fc1_1's A, fc1_2's A, fc2's B (LoRA rank 8, in =
  // out features = N).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    return {{"grad_fc1_1_lora_A", at::randn({kLoraRank, req.n}, opts)},
            {"grad_fc1_2_lora_A", at::randn({kLoraRank, req.n}, opts)},
            {"grad_fc2_lora_B", at::randn({req.n, kLoraRank}, opts)}, {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    // Handles sharing the inputs' storage: the reduction overwrites the inputs.
    at::Tensor fc1_1 = in.tensor(0), fc1_2 = in.tensor(1), fc2 = in.tensor(2);
    comm.all_reduce(fc1_1, pkb::ReduceOp::kSum);
    comm.all_reduce(fc1_2, pkb::ReduceOp::kSum);
    comm.all_reduce(fc2, pkb::ReduceOp::kSum);
    return {fc1_1, fc1_2, fc2};
  }

  // Three bandwidth-optimal all-reduces (2(W-1)/W of the bytes each way);
  // every tensor read and written once; (W-1)/W adds per element.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const pkb::blocks::TensorsSize grads = pkb::blocks::leading_tensors_size(in, 3);
    const double w = world;
    return {/*nvlink_bytes_per_rank=*/2.0 * (w - 1) / w * grads.bytes,
            /*hbm_bytes_per_rank=*/2.0 * grads.bytes,
            /*flops_per_rank=*/(w - 1) / w * grads.elems};
  }
};

}  // namespace

PKB_PROBLEM(MoeEpGroupGemmLoraBackward)
