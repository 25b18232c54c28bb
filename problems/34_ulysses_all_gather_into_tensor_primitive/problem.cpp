// The Ulysses sequence-parallel helper that all-gathers along dim 0 into one
// tensor (VeOmni / verl comm helpers): rows [s*M, (s+1)*M) of the result are
// rank s's input.
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{34, "ulysses_all_gather_into_tensor_primitive", "All-gather along dim 0 into one tensor",
                             "Context Parallel", "VeOmni / verl Ulysses sequence-parallel comm helpers", "any"};

class UlyssesAllGatherIntoTensor : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Inputs: x (M, N) randn, then the group (None = WORLD).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in;
    in.add("x", at::randn({req.m, req.n}, req.options()));
    in.add("group", pkb::None{});
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size();
    at::Tensor x = in.tensor(0).contiguous();
    // At W = 1 the published reference returns the input itself.
    if (world == 1) return {x};
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes[0] *= world;
    at::Tensor out = at::empty(sizes, x.options());
    comm.all_gather_into_tensor(out, x);
    return {out};
  }

  // Bandwidth-optimal all-gather: every rank receives the W-1 other inputs
  // (and sends its own as often). HBM: the input read, the (W*M, N) output
  // written. No arithmetic.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& x = in.tensor(0);
    const double bytes = static_cast<double>(x.numel()) * x.element_size(), w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) * bytes,
            /*hbm_bytes_per_rank=*/bytes + w * bytes,
            /*flops_per_rank=*/0};
  }
};

}  // namespace

PKB_PROBLEM(UlyssesAllGatherIntoTensor)
