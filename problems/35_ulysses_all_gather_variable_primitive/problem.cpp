// The Ulysses variable-size all-gather (VeOmni / verl comm helpers): every
// rank's shape is all-gathered first (an int64 vector per rank), receive
// buffers are allocated with those shapes, the tensors are all-gathered (list
// form) and concatenated along gather_dim in rank order.
#include "../blocks/exchange_cost.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{35, "ulysses_all_gather_variable_primitive",
                             "All-gather of possibly different-size tensors (shapes exchanged first), concatenated "
                             "along a dim",
                             "Context Parallel", "VeOmni / verl Ulysses sequence-parallel comm helpers", "any"};

class UlyssesAllGatherVariable : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Inputs: x (M, N) randn, gather_dim 0, group (None = WORLD).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    return {{"x", at::randn({req.m, req.n}, req.options())}, {"gather_dim", int64_t{0}}, {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size();
    at::Tensor x = in.tensor(0).contiguous();
    const int64_t gather_dim = in.integer(1);
    if (world == 1) return {x};
    // The shapes, as int64 vectors on the device, all-gathered (list form).
    const auto i64 = x.options().dtype(at::kLong);
    at::Tensor x_size = at::tensor(x.sizes().vec(), at::TensorOptions().dtype(at::kLong)).to(x.device());
    std::vector<at::Tensor> size_list;
    for (int s = 0; s < world; ++s) size_list.push_back(at::zeros(x_size.sizes(), i64));
    comm.all_gather(size_list, x_size);
    // Receive buffers shaped as each rank said (a host sync, as .tolist() is).
    std::vector<at::Tensor> tensor_list;
    for (int s = 0; s < world; ++s) {
      at::Tensor shape = size_list[s].cpu().contiguous();
      std::vector<int64_t> dims(shape.data_ptr<int64_t>(), shape.data_ptr<int64_t>() + shape.numel());
      tensor_list.push_back(at::empty(dims, x.options()));
    }
    comm.all_gather(tensor_list, x);
    return {at::cat(tensor_list, gather_dim).contiguous()};
  }

  // The shape exchange ((W-1) x 8 bytes per dimension), then every rank
  // receives the W-1 other tensors. HBM, the least a fused kernel needs: x
  // read, the (W*M, N) result written. No arithmetic.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    return pkb::blocks::all_gather_cost(world, in.tensor(0), /*header_bytes=*/8.0 * in.tensor(0).dim());
  }
};

}  // namespace

PKB_PROBLEM(UlyssesAllGatherVariable)
