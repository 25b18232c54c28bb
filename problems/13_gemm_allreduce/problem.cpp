// Row-parallel linear (Megatron-LM RowParallelLinear): a local GEMM, then a sum
// all-reduce of its bf16 output. Rounding points matter (catalog §13): each
// rank's product is rounded to bf16 before the bf16 all-reduce, so the sum is
// taken over rounded partials, not over fp32 accumulators.
#include "../blocks/local_gemm.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{13, "gemm_allreduce", "Local GEMM followed by a sum all-reduce (row-parallel linear)",
                             "Tensor Parallel", "Megatron-LM RowParallelLinear (GEMM + all-reduce)", "any"};

using namespace pkb::blocks;

constexpr int64_t kK = 512;  // the local contraction dimension, fixed by the published harness

class GemmAllReduce : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published: A_local's randn, then B_local's randn.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    return gemm_operands(req, "A_local", "B_local", req.m, kK, req.n);
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    at::Tensor c_local = at::matmul(in.tensor(0).contiguous(), in.tensor(1).contiguous());
    at::Tensor c = c_local.clone();
    comm.all_reduce(c, pkb::ReduceOp::kSum);
    return {c};
  }

  // Bandwidth-optimal all-reduce of the (M, N) product: 2(W-1)/W of its bytes
  // each way; HBM: the GEMM operands read and C written; 2·M·N·K flops plus
  // the (W-1)/W·M·N adds of this rank's share of the reduction.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [m, k, n, e] = gemm_sizes(in);
    const double w = world;
    return {/*nvlink_bytes_per_rank=*/2.0 * (w - 1) / w * m * n * e,
            /*hbm_bytes_per_rank=*/(m * k + k * n + m * n) * e,
            /*flops_per_rank=*/2.0 * m * n * k + (w - 1) / w * m * n};
  }
};

}  // namespace

PKB_PROBLEM(GemmAllReduce)
