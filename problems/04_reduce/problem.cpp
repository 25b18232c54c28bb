// The published reference reduces into a copy in place and returns that copy
// on every rank. On non-root ranks NCCL may use the buffer as scratch: the
// golden fixture (W=2, 128x128) shows rank 1's rows 64..127 overwritten with
// partial sums, while at 1024x1024 the catalog saw the input left untouched.
// What a non-root returns is therefore an artefact of NCCL's algorithm choice,
// not part of the task: only its shape and dtype are checked (values_checked).
#include "pkb/integrity.h"
#include "pkb/problem.h"

namespace {

constexpr int kRoot = 0;  // make_inputs always passes dst = 0

class Reduce : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{4, "reduce", "Sum reduce to rank 0",
                                    "Collective Primitive", "plain torch.distributed collective", "any"};
    return s;
  }

  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = at::TensorOptions().dtype(req.dtype).device(req.device);
    pkb::Inputs in;
    in.add("tensor", at::full({req.m, req.n}, req.rank + 1, opts));
    in.add("dst", int64_t{0});
    return in;
  }

  // Integrity trials (NOTE [integrity trials], pkb/integrity.h): the published inputs
  // are constants per rank, which an answer from rank and world alone reproduces; these
  // draw small integers in [-4, 4] per element, so every bf16 partial sum stays exact
  // for W <= 64 (|sum| <= 256), different on every rank and trial.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    return pkb::integrity_replace_tensors(make_inputs(req), -4, 4);
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm,
                         const pkb::Inputs& in) const override {
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
    pkb::Cost c;
    c.nvlink_bytes_per_rank = world > 1 ? bytes : 0.0;
    c.hbm_bytes_per_rank = 2.0 * bytes;  // read input, write output
    c.flops_per_rank = (w - 1.0) / w * numel;
    return c;
  }
};

}  // namespace

PKB_PROBLEM(Reduce)
