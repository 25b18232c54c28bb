// All-gather of a K-sharded A followed by a GEMM, with the gather done on the
// transposed shards (the layout fused AG-GEMM kernels favour). The published
// reference computes C^T = B^T · A^T and returns its transpose, so the output
// is a non-contiguous view; only its values are the contract.
#include "../blocks/allgather_gemm.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{11, "allgather_gemm_AT", "All-gather of a K-sharded A (transposed layout), then a GEMM",
                             "Tensor Parallel", "Megatron-LM style TP/SP linear (AllGather + GEMM)", "W divides 512"};

using namespace pkb::blocks;

class AllGatherGemmAT : public pkb::ProblemWithSpec<kSpec, KShardedAllGatherGemm> {
 public:
  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [a_local, b] = in.tensors<2>();
    const int64_t world = comm.world_size(), m = a_local.size(0), k_local = a_local.size(1);
    at::Tensor a_local_t = a_local.t().contiguous();
    at::Tensor a_t_buf = at::empty({world, k_local, m}, a_local_t.options());
    comm.all_gather_into_tensor(a_t_buf, a_local_t);
    at::Tensor a_global_t = a_t_buf.reshape({world * k_local, m});
    at::Tensor c_t = at::matmul(b.t(), a_global_t);
    return {c_t.t()};
  }
};

}  // namespace

PKB_PROBLEM(AllGatherGemmAT)
