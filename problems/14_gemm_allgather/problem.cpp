// Column-parallel linear with a gathered output (Megatron-LM
// ColumnParallelLinear, gather_output): each rank multiplies its own A by its
// column shard of B, and the (M, N/W) products are all-gathered and
// concatenated along columns in rank order. A differs per rank in the published
// harness (it is not a replicated activation), so column block s is A_s·B_s.
#include "pkb/problem.h"

namespace {

constexpr int64_t kK = 512;  // the contraction dimension, fixed by the published harness

class GemmAllGather : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{14, "gemm_allgather", "Column-sharded GEMM followed by an all-gather of output columns",
                                    "Tensor Parallel", "Megatron-LM ColumnParallelLinear (GEMM + gathered output)",
                                    "W divides N"};
    return s;
  }

  // RNG order as published: A's randn, then B's randn. W | N is the world rule;
  // check_world cannot see N, so it is checked here.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    PKB_CHECK(req.n % req.world == 0, "problem 14 needs W | N (N = ", req.n, ", W = ", req.world, ")");
    auto opts = at::TensorOptions().dtype(req.dtype).device(req.device);
    at::Tensor a = at::randn({req.m, kK}, opts);
    at::Tensor b = at::randn({kK, req.n / req.world}, opts);
    pkb::Inputs in;
    in.add("A", a);
    in.add("B", b);
    return in;
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
    const at::Tensor& a = in.tensor(0);
    const at::Tensor& b = in.tensor(1);
    const double m = static_cast<double>(a.size(0)), k = static_cast<double>(a.size(1));
    const double n_local = static_cast<double>(b.size(1));
    const double e = static_cast<double>(a.element_size()), w = world;
    pkb::Cost c;
    c.nvlink_bytes_per_rank = (w - 1) * m * n_local * e;
    c.hbm_bytes_per_rank = (m * k + k * n_local + m * n_local * w) * e;
    c.flops_per_rank = 2.0 * m * n_local * k;
    return c;
  }
};

}  // namespace

PKB_PROBLEM(GemmAllGather)
