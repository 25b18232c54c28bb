// Ulysses all-to-all on a packed QKV projection (VeOmni / verl
// gather_seq_scatter_heads_qkv): the last dim (3 x heads x head_dim) is viewed
// as (3, heads x head_dim) and the heads are scattered inside each of Q, K and
// V while the sequence is gathered.
#include "../blocks/exchange_cost.h"
#include "../blocks/ulysses.h"
#include "pkb/problem.h"

#include <algorithm>

namespace {

const pkb::ProblemSpec kSpec{38, "ulysses_gather_seq_scatter_heads_qkv",
                             "Ulysses all-to-all on a packed QKV projection: gather sequence, scatter heads inside "
                             "each of Q, K, V",
                             "Context Parallel", "VeOmni / verl gather_seq_scatter_heads_qkv",
                             "W divides 8 (asserted)"};

using namespace pkb::blocks;

class UlyssesGatherSeqScatterHeadsQkv : public pkb::ProblemWithSpec<kSpec> {
 public:
  std::string check_world(int world) const override { return ulysses_heads_check(world); }

  // Inputs: qkv_tensor (B, T, 3*8*64) randn with B = max(1, M/64),
  // T = max(1, N/64), seq_dim 1, group (None = WORLD), unpadded_dim_size None,
  // restore_shape true.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    return {{"qkv_tensor", ulysses_activations(req, 38, {3 * kUlyssesHeads * kUlyssesHeadDim})},
            {"seq_dim", int64_t{1}}, {"group", pkb::None{}}, {"unpadded_dim_size", pkb::None{}},
            {"restore_shape", true}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int64_t world = comm.world_size();
    const at::Tensor& qkv = in.tensor(0);
    const int64_t seq_dim = in.integer(1);
    // None (the published default) reads as 0.
    const int64_t unpadded = std::holds_alternative<pkb::None>(in.at(3).value) ? 0 : in.integer(3);
    const bool restore_shape = in.boolean(4);

    const std::vector<int64_t> orig = qkv.sizes().vec();
    const int64_t proj = orig.back();
    // The scattered dim is the original rank (the new last dim after the view).
    const int64_t scatter_dim = qkv.dim();
    std::vector<int64_t> split(orig.begin(), orig.end() - 1);
    split.push_back(3);
    split.push_back(proj / 3);
    at::Tensor x = all_to_all_tensor(comm, qkv.view(split), scatter_dim, /*gather_dim=*/seq_dim);
    if (restore_shape) {
      std::vector<int64_t> out_shape = orig;
      out_shape[seq_dim] *= world;
      out_shape.back() = proj / world;
      x = x.view(out_shape);
    }
    return {drop_seq_padding(x, seq_dim, unpadded, world)};
  }

  // (W-1)/W of the tensor leaves and as much arrives; HBM: read once, the
  // output written once.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override { return all_to_all_cost(world, in.tensor(0)); }
};

}  // namespace

PKB_PROBLEM(UlyssesGatherSeqScatterHeadsQkv)
