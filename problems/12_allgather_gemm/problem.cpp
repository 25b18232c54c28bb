// All-gather of a K-sharded A along its columns followed by a GEMM with this
// rank's own B (the Megatron-LM column-parallel AllGather-GEMM path). B differs
// per rank in the published harness, so each rank's C differs.
#include "../blocks/allgather_gemm.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{12, "allgather_gemm", "All-gather along the K dimension, then a GEMM", "Tensor Parallel",
                             "Megatron-LM column-parallel linear (AllGather + GEMM)", "W divides 512"};

using namespace pkb::blocks;

class AllGatherGemm : public pkb::ProblemWithSpec<kSpec, KShardedAllGatherGemm> {
 public:
  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [a_local, b] = in.tensors<2>();
    std::vector<at::Tensor> shards;
    for (int s = 0; s < comm.world_size(); ++s) shards.push_back(at::empty_like(a_local));
    comm.all_gather(shards, a_local);
    at::Tensor a_global = at::cat(shards, 1);
    return {at::matmul(a_global, b)};
  }
};

}  // namespace

PKB_PROBLEM(AllGatherGemm)
