// Row-parallel linear under sequence parallelism (Megatron-LM
// RowParallelLinear + reduce-scatter): a K-sharded GEMM whose bf16 partial
// products are summed by a bf16 reduce-scatter over rows. As in problem 13 the
// rounding points matter: each partial is rounded to bf16 before the sum.
#include "pkb/problem.h"

namespace {

constexpr int64_t kK = 512;  // the full contraction dimension, sharded over the ranks

class GemmReduceScatter : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{16, "gemm_reducescatter", "K-sharded GEMM followed by a sum reduce-scatter over rows",
                                    "Tensor Parallel",
                                    "Megatron-LM RowParallelLinear with sequence parallelism (GEMM + reduce-scatter)",
                                    "W divides 512 and M"};
    return s;
  }

  std::string check_world(int world) const override {
    if (world < 1 || kK % world != 0) return "W must divide K = 512";
    return "";
  }

  // RNG order as published: A_local's randn, then B_local's randn. W | M is the
  // other half of the world rule; check_world cannot see M, so it is checked here.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    PKB_CHECK(req.m % req.world == 0, "problem 16 needs W | M (M = ", req.m, ", W = ", req.world, ")");
    auto opts = at::TensorOptions().dtype(req.dtype).device(req.device);
    const int64_t k_local = kK / req.world;
    at::Tensor a_local = at::randn({req.m, k_local}, opts);
    at::Tensor b_local = at::randn({k_local, req.n}, opts);
    pkb::Inputs in;
    in.add("A_local", a_local);
    in.add("B_local", b_local);
    return in;
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
    const at::Tensor& a = in.tensor(0);
    const at::Tensor& b = in.tensor(1);
    const double m = static_cast<double>(a.size(0)), k_local = static_cast<double>(a.size(1));
    const double n = static_cast<double>(b.size(1));
    const double e = static_cast<double>(a.element_size()), w = world;
    pkb::Cost c;
    c.nvlink_bytes_per_rank = (w - 1) / w * m * n * e;
    c.hbm_bytes_per_rank = (m * k_local + k_local * n + m * n / w) * e;
    c.flops_per_rank = 2.0 * m * n * k_local + (w - 1) / w * m * n;
    return c;
  }
};

}  // namespace

PKB_PROBLEM(GemmReduceScatter)
