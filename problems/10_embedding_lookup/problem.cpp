// Row-sharded embedding lookup through two all-to-alls (torchrec/DLRM
// row-wise sharding). The published reference returns the rows grouped by
// owner rank (a stable sort of the indices by owner), not in the original
// index order; that quirk is the contract and is reproduced here.
#include "../blocks/host_list.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{10, "embedding_lookup", "Row-sharded embedding table lookup via two all-to-alls",
                             "Tensor Parallel", "torchrec / DLRM row-wise sharded embeddings", "any"};

class EmbeddingLookup : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published: the shard's randn, then the indices' randint.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    at::Tensor shard = at::randn({req.m, req.n}, req.options());
    at::Tensor indices = at::randint(0, req.world * req.m, {req.m}, req.options(at::kLong));
    return {{"indices", indices}, {"local_shard", shard}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [indices, shard] = in.tensors<2>();
    const int64_t rows = shard.size(0), world = comm.world_size(), rank = comm.rank();
    at::Tensor owner = at::div(indices, rows, "floor");
    at::Tensor order = at::argsort(owner, /*stable=*/true);
    at::Tensor wanted = indices.index_select(0, order).contiguous();  // grouped by owner, original order within
    at::Tensor send_counts = at::bincount(owner, {}, world).to(at::kLong);
    at::Tensor recv_counts = at::empty_like(send_counts);
    comm.all_to_all_single(recv_counts, send_counts);
    std::vector<int64_t> sends = pkb::blocks::host_list(send_counts), recvs = pkb::blocks::host_list(recv_counts);
    int64_t total_recv = 0;
    for (int64_t v : recvs) total_recv += v;
    at::Tensor asked = at::empty({total_recv}, indices.options());
    comm.all_to_all_single(asked, wanted, recvs, sends);
    at::Tensor local = (asked - rank * rows).clamp(0, rows - 1);
    at::Tensor served = shard.index_select(0, local).contiguous();
    at::Tensor out = at::empty({indices.size(0), shard.size(1)}, shard.options());
    comm.all_to_all_single(out, served, sends, recvs);
    return {out};
  }

  // About (W-1)/W of the indices (8 B) go out and come back as rows (2N B);
  // HBM: the served rows are read and the output written.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& shard = in.tensor(1);
    const double m = static_cast<double>(in.tensor(0).size(0)), n = static_cast<double>(shard.size(1));
    const double e = static_cast<double>(shard.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) / w * m * (8.0 + n * e),
            /*hbm_bytes_per_rank=*/2.0 * m * n * e,
            /*flops_per_rank=*/0};
  }
};

}  // namespace

PKB_PROBLEM(EmbeddingLookup)
