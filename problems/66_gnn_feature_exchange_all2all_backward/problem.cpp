// Backward of problem 65 (GraphBolt-style feature exchange): the gradient rows
// go back through the same rank-shifted all-to-all
// (blocks/rank_shifted_exchange.h), then rows that share a
// seed id are summed (a COO matrix of ones times the received rows).
#include "../blocks/rank_shifted_exchange.h"
#include "pkb/problem.h"

#include <algorithm>

namespace {

const pkb::ProblemSpec kSpec{66, "gnn_feature_exchange_all2all_backward",
                             "Backward of 65: rank-shifted all-to-all of gradients, then scatter-add into seed rows "
                             "(sparse COO x dense)",
                             "Graph Parallel",
                             "GNN feature exchange backward (DGL GraphBolt cooperative-minibatching, inferred)", "any"};

using namespace pkb::blocks;

class GnnFeatureExchangeAll2AllBackward : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published: grad_output's randn (fp32), then the index randint.
  // Inputs: grad_output (Tot, hid) fp32, seed_inverse_ids (Tot,) int64,
  // seed_size, counts_sent.0..W-1, counts_received.0..W-1, group (None).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const ExchangeSizes size = exchange_sizes(req);
    const int64_t seed_size = std::max<int64_t>(1, size.total / 2);
    at::Tensor grad = at::randn({size.total, size.hidden}, req.options(at::kFloat));
    at::Tensor ids = at::randint(0, seed_size, {size.total}, req.options(at::kLong));
    pkb::Inputs in{{"grad_output", grad}, {"seed_inverse_ids", ids}, {"seed_size", seed_size}};
    add_uniform_counts(in, req.world, size.rows);
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size();
    const auto [grad, ids] = in.tensors<2>();
    const int64_t seed_size = in.integer(2);
    // Output chunks by counts_received, input chunks by counts_sent.
    at::Tensor out = rank_shifted_all_to_all(comm, grad, counts_at(in, 3 + world, world), counts_at(in, 3, world));
    const int64_t out_rows = out.size(0);

    // COO (seed_size x rows) with a one at (ids[j], j), times out: as
    // published (torch.sparse.mm, i.e. _sparse_mm).
    at::Tensor idx = at::empty({2, out_rows}, ids.options().dtype(at::kLong));
    idx[0].copy_(ids);
    idx[1].copy_(at::arange(out_rows, ids.options().dtype(at::kLong)));
    at::Tensor coo = at::sparse_coo_tensor(idx, at::ones({out_rows}, grad.options()), {seed_size, out_rows});
    return {at::_sparse_mm(coo, out)};
  }

  // NVLink: every chunk but chunk 0 (kept) leaves: (Tot - counts_sent[0]) rows
  // of hid fp32. HBM: gradient read, exchanged rows written and read again,
  // indices read, (seed_size, hid) result written. FLOPs: one add per
  // element of the received rows.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& grad = in.tensor(0);
    const double rows = static_cast<double>(grad.size(0)), hid = static_cast<double>(grad.size(1));
    const double e = grad.element_size();
    const double kept = static_cast<double>(in.integer(3));
    const double seed_size = static_cast<double>(in.integer(2));
    return {/*nvlink_bytes_per_rank=*/(rows - kept) * hid * e,
            /*hbm_bytes_per_rank=*/3.0 * rows * hid * e + rows * 8.0 + seed_size * hid * e,
            /*flops_per_rank=*/rows * hid};
  }
};

}  // namespace

PKB_PROBLEM(GnnFeatureExchangeAll2AllBackward)
