// Row-parallel linear under sequence parallelism (Megatron-LM
// RowParallelLinear + reduce-scatter): a K-sharded GEMM whose bf16 partial
// products are summed by a bf16 reduce-scatter over rows. As in problem 13 the
// rounding points matter: each partial is rounded to bf16 before the sum.
#include "../blocks/local_gemm.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{16, "gemm_reducescatter", "K-sharded GEMM followed by a sum reduce-scatter over rows",
                             "Tensor Parallel",
                             "Megatron-LM RowParallelLinear with sequence parallelism (GEMM + reduce-scatter)",
                             "W divides 512 and M"};

using namespace pkb::blocks;

constexpr int64_t kK = 512;  // the full contraction dimension, sharded over the ranks

class GemmReduceScatter : public pkb::ProblemWithSpec<kSpec> {
 public:
  std::string check_world(int world) const override {
    if (world < 1 || kK % world != 0) return "W must divide K = 512";
    return "";
  }

  // RNG order as published: A_local's randn, then B_local's randn. W | M is the
  // other half of the world rule; check_world cannot see M, so it is checked here.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    PKB_CHECK(req.m % req.world == 0, "problem 16 needs W | M (M = ", req.m, ", W = ", req.world, ")");
    return gemm_operands(req, "A_local", "B_local", req.m, kK / req.world, req.n);
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    at::Tensor c_partial = at::matmul(in.tensor(0).contiguous(), in.tensor(1).contiguous());
    at::Tensor c_local = at::empty({c_partial.size(0) / comm.world_size(), c_partial.size(1)}, c_partial.options());
    comm.reduce_scatter_tensor(c_local, c_partial, pkb::ReduceOp::kSum);
    return {c_local};
  }

  // Bandwidth-optimal reduce-scatter of the (M, N) partial: (W-1)/W of it each
  // way; HBM: the GEMM operands read and the (M/W, N) output written;
  // 2·M·N·K/W flops plus (W-1)·(M/W)·N adds.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [m, k_local, n, e] = gemm_sizes(in);
    const double w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) / w * m * n * e,
            /*hbm_bytes_per_rank=*/(m * k_local + k_local * n + m * n / w) * e,
            /*flops_per_rank=*/2.0 * m * n * k_local + (w - 1) / w * m * n};
  }
};

}  // namespace

PKB_PROBLEM(GemmReduceScatter)
