// GNN feature exchange (GraphBolt-style cooperative minibatching): rows of the
// local feature table are gathered by index, cut into per-peer chunks, and
// exchanged with a rank-shifted all-to-all: chunk c goes to rank (r + c) mod W
// and output chunk c comes from rank (r + c) mod W.
#include "pkb/problem.h"

#include <algorithm>

namespace {

class GnnFeatureExchangeAll2All : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{65, "gnn_feature_exchange_all2all",
                                    "Gather rows of a local feature table by index, then a rank-shifted all-to-all",
                                    "Graph Parallel",
                                    "GNN feature exchange (DGL GraphBolt cooperative-minibatching all_to_all, inferred)",
                                    "any"};
    return s;
  }

  // RNG order as published: local_features' randn, then the index randint.
  // Inputs: local_features (S, hid), seed_inverse_ids (Tot,) int64,
  // counts_sent.0..W-1, counts_received.0..W-1, group (None = WORLD).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const int64_t world = req.world;
    const int64_t rows = std::max<int64_t>(64, std::min<int64_t>(req.m / world, 1024));
    const int64_t hidden = std::max<int64_t>(8, std::min<int64_t>(req.n, 128));
    const int64_t total = rows * world;
    const int64_t seed_size = std::max<int64_t>(1, total * 3 / 4);
    auto opts = at::TensorOptions().device(req.device);
    at::Tensor features = at::randn({seed_size, hidden}, opts.dtype(req.dtype));
    at::Tensor ids = at::randint(0, seed_size, {total}, opts.dtype(at::kLong));
    pkb::Inputs in;
    in.add("local_features", features);
    in.add("seed_inverse_ids", ids);
    for (int64_t d = 0; d < world; ++d) in.add("counts_sent." + std::to_string(d), rows);
    for (int64_t d = 0; d < world; ++d) in.add("counts_received." + std::to_string(d), rows);
    in.add("group", pkb::None{});
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size(), rank = comm.rank();
    const at::Tensor& features = in.tensor(0);
    const at::Tensor& ids = in.tensor(1);
    std::vector<int64_t> counts_sent(world), counts_received(world);
    for (int d = 0; d < world; ++d) {
      counts_sent[d] = in.integer(2 + d);
      counts_received[d] = in.integer(2 + world + d);
    }
    at::Tensor gathered = features.index({ids});
    int64_t out_rows = 0;
    for (int64_t c : counts_sent) out_rows += c;
    std::vector<int64_t> out_shape = features.sizes().vec();
    out_shape[0] = out_rows;
    at::Tensor out = at::empty(out_shape, features.options());
    // As published, the output is cut by counts_sent and the gathered rows by
    // counts_received; both lists are then rotated right by the rank: the
    // list entry exchanged with peer p is chunk (p - r) mod W.
    std::vector<at::Tensor> out_chunks = out.split_with_sizes(counts_sent, 0);
    std::vector<at::Tensor> in_chunks = gathered.split_with_sizes(counts_received, 0);
    std::vector<at::Tensor> send_list;
    std::vector<int64_t> send_splits(world), recv_splits(world);
    for (int p = 0; p < world; ++p) {
      const int c = ((p - rank) % world + world) % world;
      send_list.push_back(in_chunks[c]);
      send_splits[p] = in_chunks[c].size(0);
      recv_splits[p] = out_chunks[c].size(0);
    }
    at::Tensor send = at::cat(send_list, 0);
    std::vector<int64_t> recv_shape = out_shape;
    at::Tensor recv = at::empty(recv_shape, features.options());
    comm.all_to_all_single(recv, send, recv_splits, send_splits);
    std::vector<at::Tensor> recv_chunks = recv.split_with_sizes(recv_splits, 0);
    for (int p = 0; p < world; ++p) {
      const int c = ((p - rank) % world + world) % world;
      out_chunks[c].copy_(recv_chunks[p]);
    }
    return {out};
  }

  // NVLink: all chunks but the one kept (chunk 0, the rank's own) leave:
  // (Tot - counts_received[0]) rows of hid elements. HBM: the index list read,
  // the gathered rows read from the table, the output written (a fused kernel
  // sends gathered rows directly). FLOPs 0.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& features = in.tensor(0);
    const at::Tensor& ids = in.tensor(1);
    const double row_bytes = static_cast<double>(features.size(1)) * features.element_size();
    const double total = static_cast<double>(ids.numel());
    const double kept = static_cast<double>(in.integer(2 + world));
    pkb::Cost c;
    c.nvlink_bytes_per_rank = (total - kept) * row_bytes;
    c.hbm_bytes_per_rank = total * 8.0 + 2.0 * total * row_bytes;
    c.flops_per_rank = 0;
    return c;
  }
};

}  // namespace

PKB_PROBLEM(GnnFeatureExchangeAll2All)
