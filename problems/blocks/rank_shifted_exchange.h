// The rank-shifted all-to-all of GraphBolt-style cooperative minibatching
// (65 and its backward 66): the output is cut into chunks by `out_counts`
// and the rows by `in_counts`; both lists are rotated right by the rank, so
// the entry exchanged with peer p is chunk (p - r) mod W; chunk c of the
// rows goes to rank (r + c) mod W and output chunk c comes from it.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "pkb/collectives.h"
#include "pkb/inputs.h"
#include "pkb/problem.h"

namespace pkb::blocks {

// The published sizes of 65 and 66: `rows` exchanged with every peer,
// `hidden` features a row, `total` = rows·W rows in all.
struct ExchangeSizes {
  int64_t rows, hidden, total;
};

inline ExchangeSizes exchange_sizes(const InputRequest& req) {
  const int64_t rows = std::max<int64_t>(64, std::min<int64_t>(req.m / req.world, 1024));
  return {rows, std::max<int64_t>(8, std::min<int64_t>(req.n, 128)), rows * req.world};
}

// The published arguments after the tensors: counts_sent.0..W-1 and
// counts_received.0..W-1 (`rows` each), then the group (None = WORLD).
inline void add_uniform_counts(Inputs& in, int64_t world, int64_t rows) {
  for (int64_t d = 0; d < world; ++d) in.add("counts_sent." + std::to_string(d), rows);
  for (int64_t d = 0; d < world; ++d) in.add("counts_received." + std::to_string(d), rows);
  in.add("group", None{});
}

// counts.0..W-1 from argument `first` on.
inline std::vector<int64_t> counts_at(const Inputs& in, size_t first, int world) {
  std::vector<int64_t> counts(world);
  for (int d = 0; d < world; ++d) counts[d] = in.integer(first + d);
  return counts;
}

inline at::Tensor rank_shifted_all_to_all(Collectives& comm, const at::Tensor& rows,
                                          const std::vector<int64_t>& out_counts,
                                          const std::vector<int64_t>& in_counts) {
  const int world = comm.world_size(), rank = comm.rank();
  int64_t out_rows = 0;
  for (int64_t c : out_counts) out_rows += c;
  std::vector<int64_t> out_shape = rows.sizes().vec();
  out_shape[0] = out_rows;
  at::Tensor out = at::empty(out_shape, rows.options());
  std::vector<at::Tensor> out_chunks = out.split_with_sizes(out_counts, 0);
  std::vector<at::Tensor> in_chunks = rows.split_with_sizes(in_counts, 0);
  std::vector<at::Tensor> send_list;
  std::vector<int64_t> send_splits(world), recv_splits(world);
  for (int p = 0; p < world; ++p) {
    const int c = ((p - rank) % world + world) % world;
    send_list.push_back(in_chunks[c]);
    send_splits[p] = in_chunks[c].size(0);
    recv_splits[p] = out_chunks[c].size(0);
  }
  at::Tensor send = at::cat(send_list, 0);
  at::Tensor recv = at::empty(out_shape, rows.options());
  comm.all_to_all_single(recv, send, recv_splits, send_splits);
  std::vector<at::Tensor> recv_chunks = recv.split_with_sizes(recv_splits, 0);
  for (int p = 0; p < world; ++p) {
    const int c = ((p - rank) % world + world) % world;
    out_chunks[c].copy_(recv_chunks[p]);
  }
  return out;
}

}  // namespace pkb::blocks
