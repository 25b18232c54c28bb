// All-gather of a K-sharded A followed by a GEMM, with the gather done on the
// transposed shards (the layout fused AG-GEMM kernels favour). The published
// reference computes C^T = B^T · A^T and returns its transpose, so the output
// is a non-contiguous view; only its values are the contract.
#include "pkb/problem.h"

namespace {

constexpr int64_t kK = 512;  // the gathered (contraction) dimension, fixed by the published harness

class AllGatherGemmAT : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{11, "allgather_gemm_AT", "All-gather of a K-sharded A (transposed layout), then a GEMM",
                                    "Tensor Parallel", "Megatron-LM style TP/SP linear (AllGather + GEMM)",
                                    "W divides 512"};
    return s;
  }

  std::string check_world(int world) const override {
    if (world < 1 || kK % world != 0) return "W must divide K = 512";
    return "";
  }

  // RNG order as published: A_local's randn, then B's randn (B differs per rank).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = at::TensorOptions().dtype(req.dtype).device(req.device);
    at::Tensor a_local = at::randn({req.m, kK / req.world}, opts);
    at::Tensor b = at::randn({kK, req.n}, opts);
    pkb::Inputs in;
    in.add("A_local", a_local);
    in.add("B", b);
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& a_local = in.tensor(0);
    const at::Tensor& b = in.tensor(1);
    const int64_t world = comm.world_size(), m = a_local.size(0), k_local = a_local.size(1);
    at::Tensor a_local_t = a_local.t().contiguous();
    at::Tensor a_t_buf = at::empty({world, k_local, m}, a_local_t.options());
    comm.all_gather_into_tensor(a_t_buf, a_local_t);
    at::Tensor a_global_t = a_t_buf.reshape({world * k_local, m});
    at::Tensor c_t = at::matmul(b.t(), a_global_t);
    return {c_t.t()};
  }

  // The all-gather moves (W-1) foreign shards of M·K/W elements; the GEMM reads
  // the gathered A and B and writes C once; 2·M·N·K flops.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& a_local = in.tensor(0);
    const at::Tensor& b = in.tensor(1);
    const double m = static_cast<double>(a_local.size(0)), k_local = static_cast<double>(a_local.size(1));
    const double k = static_cast<double>(b.size(0)), n = static_cast<double>(b.size(1));
    const double e = static_cast<double>(a_local.element_size()), w = world;
    pkb::Cost c;
    c.nvlink_bytes_per_rank = (w - 1) * m * k_local * e;
    c.hbm_bytes_per_rank = (m * k + k * n + m * n) * e;
    c.flops_per_rank = 2.0 * m * n * k;
    return c;
  }
};

}  // namespace

PKB_PROBLEM(AllGatherGemmAT)
