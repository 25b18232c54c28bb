// The published reference reduces into a copy in place and returns that copy
// on every rank. On non-root ranks NCCL may use the buffer as scratch: the
// golden fixture (W=2, 128x128) shows rank 1's rows 64..127 overwritten with
// partial sums, while at 1024x1024 the catalog saw the input left untouched.
// What a non-root returns is therefore an artefact of NCCL's algorithm choice,
// not part of the task: only its shape and dtype are checked (values_checked).
#include "../blocks/collective_inputs.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{4, "reduce", "Sum reduce to rank 0", "Collective Primitive",
                             "plain torch.distributed collective", "any"};

using namespace pkb::blocks;

constexpr int kRoot = 0;  // make_inputs always passes dst = 0

class Reduce : public pkb::ProblemWithSpec<kSpec, RankConstantCollective> {
 public:
  Reduce() : ProblemWithSpec(kSummed) {}

  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = RankConstantCollective::make_inputs(req);
    in.add("dst", int64_t{0});
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    at::Tensor out = in.tensor(0).clone(at::MemoryFormat::Contiguous);
    comm.reduce(out, static_cast<int>(in.integer(1)), pkb::ReduceOp::kSum);
    return {out};
  }

  bool values_checked(int rank, int world, size_t index) const override { return rank == kRoot; }

  // The root must take in a full tensor's worth of partial sums (the other
  // ranks can reduce among themselves first), so B bytes bound its link; the
  // (W-1)·MN adds can be spread over all ranks.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);
    const double numel = static_cast<double>(t.numel());
    const double bytes = numel * t.element_size();
    const double w = world;
    return {/*nvlink_bytes_per_rank=*/world > 1 ? bytes : 0.0,
            /*hbm_bytes_per_rank=*/2.0 * bytes,  // read input, write output
            /*flops_per_rank=*/(w - 1.0) / w * numel};
  }
};

}  // namespace

PKB_PROBLEM(Reduce)
