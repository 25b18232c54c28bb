// Distributed feature-store lookup: query ids are routed to the rank whose
// shard of a 111 M-row embedding table holds them, the rows come back through
// a second all-to-all, the original query order is restored, and the rows are
// projected with a dense matrix (one bf16 GEMM).
#include "../blocks/host_list.h"
#include "../blocks/round_up.h"
#include "pkb/fixed_inputs.h"
#include "pkb/memory_estimate.h"
#include "pkb/problem.h"

#include <algorithm>

namespace {

const pkb::ProblemSpec kSpec{68, "gnn_sparse_feature_fetch_projection",
                             "Fetch embedding rows from a row-sharded 111M-node table via two all-to-alls (ids out, "
                             "rows back), restore query order, project with a dense matrix",
                             "Graph Parallel", "GNN distributed feature store lookup (unknown)", "any"};

using pkb::blocks::round_up;

// The published table has max(111 000 000, M) rows at every base shape (at
// least 28 GB over all ranks), more than a CPU test machine holds. On the
// CPU device only, make_inputs builds a table 1000 times smaller; everything
// else (the id formula, the query count, the widths) is as published. See
// the README.
constexpr int64_t kTableRows = 111000000;
constexpr int64_t kCpuTableRows = 111000;

using pkb::blocks::host_list;

class GnnSparseFeatureFetchProjection : public pkb::ProblemWithSpec<kSpec>, public pkb::FixedInputs {
 public:
  // RNG order as published: the shard's randn, then the projection's randn
  // (different on every rank); the ids are deterministic. Inputs:
  // local_embedding_shard (shard, E), input_node_ids (Q,) int64,
  // proj_matrix (E, E), num_total_nodes, group (None).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const int64_t world = req.world, rank = req.rank;
    const int64_t base_rows = req.device.is_cpu() ? kCpuTableRows : kTableRows;
    const int64_t total = round_up(std::max<int64_t>(base_rows, req.m), world);
    const int64_t shard = total / world;
    const int64_t embed = req.n >= 256 ? 256 : 128;
    at::Tensor table = at::randn({shard, embed}, req.options());
    at::Tensor proj = at::randn({embed, embed}, req.options());
    const int64_t queries = std::max<int64_t>(20000, std::min<int64_t>(req.m / world, 200000));
    at::Tensor base = at::arange(queries, req.options(at::kLong));
    at::Tensor owner = (base + rank).remainder(world);
    at::Tensor local = (base * 7 + rank).remainder(shard);
    at::Tensor ids = owner * shard + local;
    return {{"local_embedding_shard", table.contiguous()}, {"input_node_ids", ids.contiguous()},
            {"proj_matrix", proj.contiguous()}, {"num_total_nodes", total}, {"group", pkb::None{}}};
  }

  // NOTE [fixed inputs]: the table (56.8 GB at W = 1) is read only; the
  // timed calls and the refresh keep it and get a new projection and the
  // published id pattern at a new offset into every shard, the same offset on
  // every rank: new rows each call, with the published locality (a window of
  // 7Q rows per shard, read in order by every rank). Ids uniform over the
  // whole table made the gather ~25x slower than the published pattern on
  // an H200 (603 us against 24 us a call at W = 1), a different problem.
  std::vector<size_t> fixed_inputs() const override { return {0}; }
  pkb::Inputs vary_inputs(const pkb::InputRequest& req, const pkb::Inputs& base) const override {
    const at::Tensor& table = base.tensor(0);
    const at::Tensor& proj = base.tensor(2);
    const int64_t total = base.integer(3);
    const int64_t world = req.world, rank = req.rank, shard = total / world;
    const int64_t offset = static_cast<int64_t>(pkb::world_draw_key(req) % static_cast<uint64_t>(shard));
    at::Tensor i = at::arange(base.tensor(1).numel(), base.tensor(1).options());
    at::Tensor ids = (i + rank).remainder(world) * shard + (i * 7 + rank + offset).remainder(shard);
    return {{"local_embedding_shard", table}, {"input_node_ids", ids.contiguous()},
            {"proj_matrix", at::randn(proj.sizes(), proj.options())}, {"num_total_nodes", total},
            {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size(), rank = comm.rank();
    const auto [table, ids, proj] = in.tensors<3>();
    const int64_t total = in.integer(3);
    const int64_t shard = (total + world - 1) / world;
    const int64_t embed = table.size(1), queries = ids.size(0);

    at::Tensor owner = at::div(ids, shard, "floor").clamp_max(world - 1);
    at::Tensor sort_idx = at::argsort(owner, /*stable=*/true);
    at::Tensor sorted_ids = ids.index({sort_idx});
    at::Tensor sorted_owner = owner.index({sort_idx});
    at::Tensor send_counts = at::zeros({world}, ids.options().dtype(at::kLong));
    send_counts.scatter_add_(0, sorted_owner, at::ones_like(sorted_owner));
    at::Tensor recv_counts = at::empty_like(send_counts);
    comm.all_to_all_single(recv_counts, send_counts);

    std::vector<int64_t> send_splits = host_list(send_counts), recv_splits = host_list(recv_counts);
    int64_t recv_total = 0;
    for (int64_t c : recv_splits) recv_total += c;
    at::Tensor recv_ids = at::empty({recv_total}, ids.options());
    comm.all_to_all_single(recv_ids, sorted_ids, recv_splits, send_splits);

    at::Tensor local_ids = (recv_ids - rank * shard).to(at::kLong);
    at::Tensor fetched = table.index({local_ids});
    at::Tensor gathered = at::empty({queries, embed}, fetched.options());
    comm.all_to_all_single(gathered, fetched, send_splits, recv_splits);
    at::Tensor emb = gathered.index({at::argsort(sort_idx, /*stable=*/true)});
    return {at::matmul(emb, proj)};
  }

  // NVLink: the ids owned by other ranks leave (8 B each) and as many rows
  // come back (E·e B each): (W-1)/W·Q·(8 + E·e) bytes each way (exact for
  // the published ids, Q/W per owner), plus W·8 B of counts. HBM: ids read,
  // Q table rows read by the owner (as many as this rank is asked for, Q on
  // average), rows written on arrival and read back in query order, the
  // projection read and the (Q, E) result written. FLOPs: 2·Q·E·E.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [table, ids, proj] = in.tensors<3>();
    const double q = static_cast<double>(ids.numel()), e = table.element_size();
    const double embed = static_cast<double>(table.size(1)), out_dim = static_cast<double>(proj.size(1));
    const double w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) / w * q * (8.0 + embed * e) + w * 8.0,
            /*hbm_bytes_per_rank=*/3.0 * q * 8.0 + 3.0 * q * embed * e + static_cast<double>(proj.nbytes()) +
                q * out_dim * e,
            /*flops_per_rank=*/2.0 * q * embed * out_dim};
  }
};

// NOTE [memory admission]. CPU (the table 1000 times smaller): measured, the
// largest rank's VmHWM in a reference run timed with one input group per
// side, 2.39 GiB at W=2 and 2.20 GiB at W=4 (128x128): 2.5 GiB declared
// while the query count stays at its floor (m/W <= 20000) and the table at
// its 111 000 rows. GPU: from the code: with the table fixed (NOTE [fixed
// inputs]) a rank holds two copies of its shard, the referee's and its
// contestant's (one where the candidate is the reference, in the referee),
// 56.8 GB / W each at n >= 256 (bf16, 256 wide; 128 wide below), plus 4 GiB
// (the contestant's CUDA context, the timing's groups of ids and
// projections, outputs). Before the table was fixed it was four copies
// (214 GiB at W = 1).
int64_t memory_estimate(int world, int64_t m, int64_t n, bool cuda) {
  if (!cuda) return m <= kCpuTableRows && m / world <= 20000 ? int64_t{5} << 29 : 0;
  const int64_t rows = round_up(std::max<int64_t>(kTableRows, m), world) / world;
  const int64_t embed = n >= 256 ? 256 : 128;
  return 2 * rows * embed * 2 + (int64_t{4} << 30);
}

}  // namespace

PKB_MEMORY_ESTIMATE(memory_estimate)
PKB_PROBLEM(GnnSparseFeatureFetchProjection)
