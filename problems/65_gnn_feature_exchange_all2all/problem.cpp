// GNN feature exchange (GraphBolt-style cooperative minibatching): rows of the
// local feature table are gathered by index, cut into per-peer chunks, and
// exchanged with a rank-shifted all-to-all: chunk c goes to rank (r + c) mod W
// and output chunk c comes from rank (r + c) mod W (blocks/rank_shifted_exchange.h).
#include "../blocks/rank_shifted_exchange.h"
#include "pkb/problem.h"

#include <algorithm>

namespace {

const pkb::ProblemSpec kSpec{65, "gnn_feature_exchange_all2all",
                             "Gather rows of a local feature table by index, then a rank-shifted all-to-all",
                             "Graph Parallel",
                             "GNN feature exchange (DGL GraphBolt cooperative-minibatching all_to_all, inferred)",
                             "any"};

using namespace pkb::blocks;

class GnnFeatureExchangeAll2All : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published: local_features' randn, then the index randint.
  // Inputs: local_features (S, hid), seed_inverse_ids (Tot,) int64,
  // counts_sent.0..W-1, counts_received.0..W-1, group (None = WORLD).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const ExchangeSizes size = exchange_sizes(req);
    const int64_t seed_size = std::max<int64_t>(1, size.total * 3 / 4);
    at::Tensor features = at::randn({seed_size, size.hidden}, req.options());
    at::Tensor ids = at::randint(0, seed_size, {size.total}, req.options(at::kLong));
    pkb::Inputs in{{"local_features", features}, {"seed_inverse_ids", ids}};
    add_uniform_counts(in, req.world, size.rows);
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size();
    const auto [features, ids] = in.tensors<2>();
    // As published, the output is cut by counts_sent and the gathered rows by
    // counts_received.
    at::Tensor out = rank_shifted_all_to_all(comm, features.index({ids}), counts_at(in, 2, world),
                                             counts_at(in, 2 + world, world));
    return {out};
  }

  // NVLink: all chunks but the one kept (chunk 0, the rank's own) leave:
  // (Tot - counts_received[0]) rows of hid elements. HBM: the index list read,
  // the gathered rows read from the table, the output written (a fused kernel
  // sends gathered rows directly). FLOPs 0.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [features, ids] = in.tensors<2>();
    const double row_bytes = static_cast<double>(features.size(1)) * features.element_size();
    const double total = static_cast<double>(ids.numel());
    const double kept = static_cast<double>(in.integer(2 + world));
    return {/*nvlink_bytes_per_rank=*/(total - kept) * row_bytes,
            /*hbm_bytes_per_rank=*/total * 8.0 + 2.0 * total * row_bytes,
            /*flops_per_rank=*/0};
  }
};

}  // namespace

PKB_PROBLEM(GnnFeatureExchangeAll2All)
