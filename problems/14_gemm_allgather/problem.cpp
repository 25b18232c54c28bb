// Column-parallel linear with a gathered output (Megatron-LM
// ColumnParallelLinear, gather_output): each rank multiplies its own A by its
// column shard of B, and the (M, N/W) products are all-gathered and
// concatenated along columns in rank order. A differs per rank in the published
// harness (it is not a replicated activation), so column block s is A_s·B_s.
#include "../blocks/local_gemm.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{14, "gemm_allgather", "Column-sharded GEMM followed by an all-gather of output columns",
                             "Tensor Parallel", "Megatron-LM ColumnParallelLinear (GEMM + gathered output)",
                             "W divides N"};

using namespace pkb::blocks;

constexpr int64_t kK = 512;  // the contraction dimension, fixed by the published harness

class GemmAllGather : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published: A's randn, then B's randn. W | N is the world rule;
  // check_world cannot see N, so it is checked here.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    PKB_CHECK(req.n % req.world == 0, "problem 14 needs W | N (N = ", req.n, ", W = ", req.world, ")");
    return gemm_operands(req, "A", "B", req.m, kK, req.n / req.world);
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    at::Tensor c_local = at::matmul(in.tensor(0).contiguous(), in.tensor(1).contiguous());
    std::vector<at::Tensor> gathered;
    for (int s = 0; s < comm.world_size(); ++s) gathered.push_back(at::zeros_like(c_local));
    comm.all_gather(gathered, c_local);
    return {at::cat(gathered, 1)};
  }

  // The all-gather moves (W-1) foreign (M, N/W) blocks; HBM: A and B read, the
  // full (M, N) output written; 2·M·(N/W)·K flops.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [m, k, n_local, e] = gemm_sizes(in);
    const double w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) * m * n_local * e,
            /*hbm_bytes_per_rank=*/(m * k + k * n_local + m * n_local * w) * e,
            /*flops_per_rank=*/2.0 * m * n_local * k};
  }
};

}  // namespace

PKB_PROBLEM(GemmAllGather)
