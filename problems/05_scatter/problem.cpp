// Input shapes differ by rank, as in the published reference: only rank 0 holds
// the (W, M, N) source; the others hold an (M, N) tensor of zeros that the
// reference clones and scatters into, so it only fixes the output's shape.
#include "../blocks/collective_inputs.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{5, "scatter", "Scatter slices of a stacked tensor from rank 0", "Collective Primitive",
                             "plain torch.distributed collective", "any"};

using namespace pkb::blocks;

constexpr int kSrc = 0;

class Scatter : public pkb::ProblemWithSpec<kSpec> {
 public:
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    pkb::Inputs in;
    if (req.rank == kSrc) {
      at::Tensor t = at::empty({req.world, req.m, req.n}, opts);
      for (int i = 0; i < req.world; ++i) t[i].fill_(i + 1);
      in.add("tensor", t);
    } else {
      in.add("tensor", at::zeros({req.m, req.n}, opts));
    }
    return in;
  }

  // NOTE [constant collective inputs] (blocks/collective_inputs.h).
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    return integers_for_moved_data(make_inputs(req));
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);
    if (comm.rank() == kSrc) {
      std::vector<at::Tensor> slices;
      for (const at::Tensor& chunk : t.chunk(comm.world_size(), 0)) {
        slices.push_back(chunk.squeeze(0).contiguous());
      }
      at::Tensor out = at::empty_like(slices[0]);
      comm.scatter(out, &slices, kSrc);
      return {out};
    }
    at::Tensor out = t.clone(at::MemoryFormat::Contiguous);
    comm.scatter(out, nullptr, kSrc);
    return {out};
  }

  // The root must send the W-1 slices it does not keep; rank 0 is the
  // bottleneck and its figures are returned. Nothing is summed.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);  // (W, M, N) on rank 0, (M, N) elsewhere
    const double slice = static_cast<double>(t.size(-2) * t.size(-1)) * t.element_size();
    return {/*nvlink_bytes_per_rank=*/(world - 1) * slice,
            /*hbm_bytes_per_rank=*/world * slice + slice};  // root: read (W, M, N), write (M, N)
  }
};

}  // namespace

PKB_PROBLEM(Scatter)
