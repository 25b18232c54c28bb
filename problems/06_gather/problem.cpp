// Output shapes differ by rank, as in the published reference: rank 0 returns
// the stacked (W, M, N) tensor; every other rank returns its input tensor
// itself (M, N), untouched, and that is compared too.
#include "../blocks/collective_inputs.h"
#include "../blocks/exchange_cost.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{6, "gather", "Gather to rank 0 as a stacked tensor", "Collective Primitive",
                             "plain torch.distributed collective", "any"};

using namespace pkb::blocks;

constexpr int kDst = 0;

class Gather : public pkb::ProblemWithSpec<kSpec, RankConstantCollective> {
 public:
  Gather() : ProblemWithSpec(kMoved) {}

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);
    if (comm.rank() != kDst) {
      comm.gather(t.contiguous(), nullptr, kDst);
      return {t};
    }
    std::vector<at::Tensor> parts;
    for (int i = 0; i < comm.world_size(); ++i) parts.push_back(at::empty_like(t));
    comm.gather(t.contiguous(), &parts, kDst);
    return {at::stack(parts, 0)};
  }

  // The root must receive the W-1 other tensors, as every rank of an
  // all-gather does; it is the bottleneck and its figures are returned.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override { return all_gather_cost(world, in.tensor(0)); }
};

}  // namespace

PKB_PROBLEM(Gather)
