// The Ulysses sequence-parallel reshuffles (VeOmni / verl comm helpers,
// DeepSpeed-Ulysses: 33, 36-39, and the context-parallel 72 and 75): the all-to-all that scatters one dim of a
// tensor over the world and gathers another, and the (B, T, 8, 64) inputs of
// the head-scattering problems.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "pkb/check.h"
#include "pkb/collectives.h"
#include "pkb/problem.h"

namespace pkb::blocks {

constexpr int64_t kUlyssesHeads = 8;
constexpr int64_t kUlyssesHeadDim = 64;

inline at::Tensor exchange(Collectives& comm, const at::Tensor& send) {
  if (comm.world_size() == 1) return send.clone();
  at::Tensor recv = at::empty_like(send);
  comm.all_to_all_single(recv, send);
  return recv;
}

// torch.distributed's list all_to_all over the tensor_split blocks of x along
// scatter_dim, concatenated along gather_dim in source-rank order. Through the
// facade: the W contiguous blocks packed one after another, exchanged in
// equal splits (the same bytes to the same places), unpacked.
inline at::Tensor list_all_to_all(Collectives& comm, const at::Tensor& x, int64_t scatter_dim, int64_t gather_dim) {
  const int64_t world = comm.world_size();
  PKB_CHECK(x.size(scatter_dim) % world == 0, "dim ", scatter_dim, " (", x.size(scatter_dim), ") not divisible by W");
  std::vector<at::Tensor> blocks = at::tensor_split(x, world, scatter_dim);
  std::vector<at::Tensor> packed;
  for (const auto& b : blocks) packed.push_back(b.contiguous().reshape({-1}));
  at::Tensor recv = exchange(comm, at::cat(packed, 0));
  std::vector<at::Tensor> received;
  for (const auto& r : recv.chunk(world, 0)) received.push_back(r.view(blocks[0].sizes()));
  return at::cat(received, gather_dim).contiguous();
}

// The published _all_to_all_tensor: when both dims are 0 or 1 it uses one
// all_to_all_single (for scatter_dim 1 after a reshape/transpose that moves the
// scattered blocks to the front); otherwise the list all_to_all.
inline at::Tensor all_to_all_tensor(Collectives& comm, at::Tensor x, int64_t scatter_dim, int64_t gather_dim) {
  const int64_t world = comm.world_size();
  PKB_CHECK(x.size(scatter_dim) % world == 0, "the scattered dim ", scatter_dim, " (", x.size(scatter_dim),
            ") is not divisible by W = ", world);
  if (scatter_dim <= 1 && gather_dim <= 1) {
    if (scatter_dim != 0) {
      const int64_t g = x.size(gather_dim), s = x.size(scatter_dim);
      std::vector<int64_t> rest(x.sizes().begin() + 2, x.sizes().end());
      std::vector<int64_t> split{g, world, s / world}, merged{g * world, s / world};
      split.insert(split.end(), rest.begin(), rest.end());
      merged.insert(merged.end(), rest.begin(), rest.end());
      x = x.reshape(split).transpose(0, 1).reshape(merged).contiguous();
    }
    at::Tensor out = exchange(comm, x.contiguous());
    if (scatter_dim == 0) out = at::cat(out.split(x.size(0) / world), gather_dim);
    return out;
  }
  return list_all_to_all(comm, x, scatter_dim, gather_dim);
}

// Drops the padding the sequence got before it was sharded: `unpadded`
// rows remain along `seq_dim` (0: none to drop). Never taken with the
// benchmark's inputs (36 and 38 pass 0 and None).
inline at::Tensor drop_seq_padding(const at::Tensor& x, int64_t seq_dim, int64_t unpadded, int world) {
  if (unpadded == 0 || unpadded % world == 0) return x;
  return x.narrow(seq_dim, 0, unpadded);
}

// The head-scattering problems (36-38) assert that W divides the 8 heads.
inline std::string ulysses_heads_check(int world) {
  if (world < 1 || kUlyssesHeads % world != 0) return "the world size must divide the 8 attention heads";
  return "";
}

// randn (B, T, last...) with B = max(1, M/64), T = max(1, N/64): the
// sequence-sharded activations of 36-38.
inline at::Tensor ulysses_activations(const InputRequest& req, int problem, std::vector<int64_t> last) {
  PKB_CHECK(kUlyssesHeads % req.world == 0, "problem ", problem, " needs W to divide the 8 heads (W = ", req.world,
            ")");
  const int64_t b = std::max<int64_t>(1, req.m / 64), t = std::max<int64_t>(1, req.n / 64);
  std::vector<int64_t> shape{b, t};
  shape.insert(shape.end(), last.begin(), last.end());
  return at::randn(shape, req.options());
}

// The inputs of 36 and 37: x (B, T, 8, 64) as ulysses_activations, seq_dim
// 1, head_dim 2, group (None = WORLD).
inline Inputs ulysses_head_inputs(const InputRequest& req, int problem) {
  return {{"x", ulysses_activations(req, problem, {kUlyssesHeads, kUlyssesHeadDim})}, {"seq_dim", int64_t{1}},
          {"head_dim", int64_t{2}}, {"group", None{}}};
}

}  // namespace pkb::blocks
