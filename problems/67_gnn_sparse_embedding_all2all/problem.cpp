// Sparse embedding push (DGL-style NCCL sparse all-to-all, inferred): each
// (index, row) update goes to the rank that owns the index (index mod W),
// through a count exchange and two variable all-to-alls.
#include "../blocks/round_up.h"
#include "pkb/problem.h"

#include <algorithm>

namespace {

const pkb::ProblemSpec kSpec{67, "gnn_sparse_embedding_all2all",
                             "Push sparse (index, row) embedding updates to their owner rank (index mod W) with a "
                             "variable all-to-all",
                             "Graph Parallel", "GNN sparse embedding push (DGL NCCL sparse all-to-all, inferred)",
                             "any"};

using pkb::blocks::round_up;

class GnnSparseEmbeddingAll2All : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published: the index randint, then the values' randn.
  // Inputs: idx (nnz,) int64, value (nnz, hid), num_nodes, group (None).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const int64_t world = req.world;
    const int64_t num_nodes = round_up(std::max<int64_t>(100000, req.m), world);
    const int64_t nnz = std::max<int64_t>(1024, std::min<int64_t>(req.m / world, 50000));
    const int64_t hidden = std::max<int64_t>(8, std::min<int64_t>(req.n, 128));
    at::Tensor idx = at::randint(0, num_nodes, {nnz}, req.options(at::kLong));
    at::Tensor value = at::randn({nnz, hidden}, req.options());
    return {{"idx", idx}, {"value", value}, {"num_nodes", num_nodes}, {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size();
    const auto [idx, value] = in.tensors<2>();
    if (world == 1) return {idx, value};  // as published: the inputs themselves

    at::Tensor owner = idx.remainder(world).to(at::kLong);
    at::Tensor send_splits = at::bincount(owner, {}, world);
    at::Tensor perm = at::argsort(owner, /*stable=*/true).to(at::kLong);

    at::Tensor recv_splits = at::empty_like(send_splits);
    comm.all_to_all_single(recv_splits, send_splits);
    at::Tensor recv_cpu = recv_splits.to(at::kCPU).contiguous();
    at::Tensor send_cpu = send_splits.to(at::kCPU).contiguous();
    at::Tensor send_idx = idx.index({perm});
    at::Tensor send_value = value.index({perm});
    std::vector<int64_t> recv_list(recv_cpu.data_ptr<int64_t>(), recv_cpu.data_ptr<int64_t>() + world);
    std::vector<int64_t> send_list(send_cpu.data_ptr<int64_t>(), send_cpu.data_ptr<int64_t>() + world);
    int64_t recv_count = 0;
    for (int64_t c : recv_list) recv_count += c;

    at::Tensor recv_idx = at::empty({recv_count}, idx.options());
    comm.all_to_all_single(recv_idx, send_idx, recv_list, send_list);
    std::vector<int64_t> value_shape = value.sizes().vec();
    value_shape[0] = recv_count;
    at::Tensor recv_value = at::empty(value_shape, value.options());
    comm.all_to_all_single(recv_value, send_value, recv_list, send_list);
    return {recv_idx, recv_value};
  }

  // NVLink: the updates not owned by this rank leave, about (W-1)/W of nnz
  // (index 8 B + row hid*e B each); counted from this rank's own indices.
  // HBM: idx and value read twice (owner/permute, then send), the received
  // rows written. FLOPs 0 (integer remainder and a sort).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [idx, value] = in.tensors<2>();
    const double nnz = static_cast<double>(idx.numel());
    const double row = 8.0 + static_cast<double>(value.size(1)) * value.element_size();
    const double w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) / w * nnz * row,
            /*hbm_bytes_per_rank=*/3.0 * nnz * row,
            /*flops_per_rank=*/0};
  }
};

}  // namespace

PKB_PROBLEM(GnnSparseEmbeddingAll2All)
