// Row-parallel linear (Megatron-LM RowParallelLinear): a local GEMM, then a sum
// all-reduce of its bf16 output. Rounding points matter (catalog §13): each
// rank's product is rounded to bf16 before the bf16 all-reduce, so the sum is
// taken over rounded partials, not over fp32 accumulators.
#include "pkb/problem.h"

namespace {

constexpr int64_t kK = 512;  // the local contraction dimension, fixed by the published harness

class GemmAllReduce : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{13, "gemm_allreduce", "Local GEMM followed by a sum all-reduce (row-parallel linear)",
                                    "Tensor Parallel", "Megatron-LM RowParallelLinear (GEMM + all-reduce)", "any"};
    return s;
  }

  // RNG order as published: A_local's randn, then B_local's randn.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = at::TensorOptions().dtype(req.dtype).device(req.device);
    at::Tensor a_local = at::randn({req.m, kK}, opts);
    at::Tensor b_local = at::randn({kK, req.n}, opts);
    pkb::Inputs in;
    in.add("A_local", a_local);
    in.add("B_local", b_local);
    return in;
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
    const at::Tensor& a = in.tensor(0);
    const at::Tensor& b = in.tensor(1);
    const double m = static_cast<double>(a.size(0)), k = static_cast<double>(a.size(1));
    const double n = static_cast<double>(b.size(1));
    const double e = static_cast<double>(a.element_size()), w = world;
    pkb::Cost c;
    c.nvlink_bytes_per_rank = 2.0 * (w - 1) / w * m * n * e;
    c.hbm_bytes_per_rank = (m * k + k * n + m * n) * e;
    c.flops_per_rank = 2.0 * m * n * k + (w - 1) / w * m * n;
    return c;
  }
};

}  // namespace

PKB_PROBLEM(GemmAllReduce)
