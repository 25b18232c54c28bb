// Causal depthwise conv1d (kernel 7) over a zig-zag context-parallel sequence:
// every rank holds two chunks of the global sequence (chunk r and chunk
// 2W-1-r), and the 6-element halo each chunk needs is exchanged with the
// neighbouring ranks before one grouped conv over both chunks (catalog §71).
// The published code posts the four P2P ops in one batch_isend_irecv; the
// facade has blocking send/recv, so they are ordered by rank parity (even
// ranks send first, odd ranks receive first), which cannot deadlock and moves
// the same data.
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{71, "hyena_conv1d_boundary_exchange",
                             "Causal depthwise conv1d on a zig-zag CP sequence with halo exchange", "Context Parallel",
                             "Hyena (Savanna / Evo 2 context-parallel short conv, zig-zag halo exchange)", "any"};

constexpr int64_t kChannels = 1024;
constexpr int64_t kKernel = 7;
constexpr int64_t kChunk = 1024;

class HyenaConv1dBoundaryExchange : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Fixed shapes whatever the base shape. RNG order: x, weight (both per rank).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    return {{"x", at::randn({1, kChannels, 2 * kChunk}, opts)}, {"weight", at::randn({kChannels, 1, kKernel}, opts)},
            {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [x, weight] = in.tensors<2>();
    const int rank = comm.rank(), world = comm.world_size();
    const int64_t batch = x.size(0), hidden = x.size(1), local_seq = x.size(2);
    const int64_t chunk_len = local_seq / 2, pad = weight.size(-1) - 1;

    // (B, C, 2, Lc) -> tails of chunk A and chunk B, each (B, C, pad).
    at::Tensor chunks = x.reshape({batch, hidden, 2, chunk_len});
    at::Tensor tail_a = chunks.select(2, 0).narrow(-1, chunk_len - pad, pad).contiguous();
    at::Tensor tail_b = chunks.select(2, 1).narrow(-1, chunk_len - pad, pad).contiguous();

    at::Tensor prev_a, next_b;
    const bool has_prev = rank > 0, has_next = rank < world - 1;
    if (has_prev) prev_a = at::empty_like(tail_a);
    if (has_next) next_b = at::empty_like(tail_b);
    // Tail of A moves forward (r -> r+1), tail of B backward (r -> r-1).
    if (rank % 2 == 0) {
      if (has_next) comm.send(tail_a, rank + 1, /*tag=*/0);
      if (has_prev) comm.recv(prev_a, rank - 1, 0);
      if (has_prev) comm.send(tail_b, rank - 1, /*tag=*/1);
      if (has_next) comm.recv(next_b, rank + 1, 1);
    } else {
      if (has_prev) comm.recv(prev_a, rank - 1, 0);
      if (has_next) comm.send(tail_a, rank + 1, 0);
      if (has_next) comm.recv(next_b, rank + 1, 1);
      if (has_prev) comm.send(tail_b, rank - 1, 1);
    }
    // As published: rank 0 pads A with zeros; the last rank pads B with its own
    // tail of A (its chunk B = global chunk W follows its chunk A = W-1).
    if (!has_prev) prev_a = at::zeros_like(tail_a);
    if (!has_next) next_b = tail_a.clone();

    // Both chunks as a batch of 2 through one grouped (depthwise) conv.
    at::Tensor x_chunks = x.reshape({batch, hidden, 2, chunk_len}).permute({2, 0, 1, 3}).reshape({2 * batch, hidden, chunk_len});
    at::Tensor padding = at::cat({prev_a, next_b}, 0);
    at::Tensor x_padded = at::cat({padding, x_chunks}, -1);
    at::Tensor y = at::conv1d(x_padded, weight, /*bias=*/std::nullopt, /*stride=*/at::IntArrayRef{1}, /*padding=*/at::IntArrayRef{0},
                              /*dilation=*/at::IntArrayRef{1},
                              /*groups=*/hidden);
    return {y.reshape({2, batch, hidden, chunk_len}).permute({1, 2, 0, 3}).reshape({batch, hidden, local_seq})};
  }

  // NVLink: at most two halos sent, C*(K-1) elements each. HBM: x read, y
  // written, the weight read. FLOPs: 2*K per output element.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [x, w] = in.tensors<2>();
    const double e = static_cast<double>(x.element_size()), n = static_cast<double>(x.numel());
    const double k = static_cast<double>(w.size(-1)), c = static_cast<double>(x.size(1));
    return {/*nvlink_bytes_per_rank=*/(world > 1 ? 2.0 : 0.0) * c * (k - 1) * e,
            /*hbm_bytes_per_rank=*/2.0 * n * e + static_cast<double>(w.numel()) * e,
            /*flops_per_rank=*/2.0 * k * n};
  }
};

}  // namespace

PKB_PROBLEM(HyenaConv1dBoundaryExchange)
