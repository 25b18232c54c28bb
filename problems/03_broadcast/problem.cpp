// The published reference broadcasts a copy from rank 0, so every rank's input
// keeps its value (r + 1) and every output is all 1.
#include "pkb/integrity.h"
#include "pkb/problem.h"

namespace {

constexpr int kSrc = 0;

class Broadcast : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{3, "broadcast", "Broadcast from rank 0",
                                    "Collective Primitive", "plain torch.distributed collective", "any"};
    return s;
  }

  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = at::TensorOptions().dtype(req.dtype).device(req.device);
    pkb::Inputs in;
    in.add("tensor", at::full({req.m, req.n}, req.rank + 1, opts));
    return in;
  }

  // Integrity trials (NOTE [integrity trials], pkb/integrity.h): the published inputs
  // are constants per rank, which an answer from rank and world alone reproduces; these
  // draw integers in [-100, 100] per element (exact in bf16; the data is only moved),
  // different on every rank and trial.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    return pkb::integrity_replace_tensors(make_inputs(req), -100, 100);
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm,
                         const pkb::Inputs& in) const override {
    at::Tensor out = in.tensor(0).clone(at::MemoryFormat::Contiguous);
    comm.broadcast(out, kSrc);
    return {out};
  }

  // Each non-root must receive the whole tensor once; a pipelined chain (or a
  // scatter then all-gather) keeps every rank's traffic at that. No adds.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);
    const double bytes = static_cast<double>(t.numel()) * t.element_size();
    pkb::Cost c;
    c.nvlink_bytes_per_rank = world > 1 ? bytes : 0.0;
    c.hbm_bytes_per_rank = 2.0 * bytes;  // root: read input, write output
    return c;
  }
};

}  // namespace

PKB_PROBLEM(Broadcast)
