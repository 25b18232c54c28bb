// All-gather of a K-sharded A along its columns followed by a GEMM with this
// rank's own B (the Megatron-LM column-parallel AllGather-GEMM path). B differs
// per rank in the published harness, so each rank's C differs.
#include "pkb/problem.h"

namespace {

constexpr int64_t kK = 512;  // the gathered (contraction) dimension, fixed by the published harness

class AllGatherGemm : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{12, "allgather_gemm", "All-gather along the K dimension, then a GEMM",
                                    "Tensor Parallel", "Megatron-LM column-parallel linear (AllGather + GEMM)",
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
    std::vector<at::Tensor> shards;
    for (int s = 0; s < comm.world_size(); ++s) shards.push_back(at::empty_like(a_local));
    comm.all_gather(shards, a_local);
    at::Tensor a_global = at::cat(shards, 1);
    return {at::matmul(a_global, b)};
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

PKB_PROBLEM(AllGatherGemm)
