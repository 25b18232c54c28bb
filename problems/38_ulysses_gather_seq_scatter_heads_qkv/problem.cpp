// Ulysses all-to-all on a packed QKV projection (VeOmni / verl
// gather_seq_scatter_heads_qkv): the last dim (3 x heads x head_dim) is viewed
// as (3, heads x head_dim) and the heads are scattered inside each of Q, K and
// V while the sequence is gathered.
#include "pkb/problem.h"

#include <algorithm>

namespace {

constexpr int64_t kHeads = 8;
constexpr int64_t kHeadDim = 64;

// The published _all_to_all_tensor: when both dims are 0 or 1 it uses one
// all_to_all_single (for scatter_dim 1 after a reshape/transpose that moves the
// scattered blocks to the front); otherwise torch.distributed's list
// all_to_all over tensor_split blocks, concatenated along gather_dim. The list
// form goes through the facade as the W contiguous blocks packed one after
// another and exchanged in equal splits (the same bytes to the same places).
at::Tensor exchange(pkb::Collectives& comm, const at::Tensor& send) {
  if (comm.world_size() == 1) return send.clone();
  at::Tensor recv = at::empty_like(send);
  comm.all_to_all_single(recv, send);
  return recv;
}

at::Tensor all_to_all_tensor(pkb::Collectives& comm, at::Tensor x, int64_t scatter_dim, int64_t gather_dim) {
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
  std::vector<at::Tensor> blocks = at::tensor_split(x, world, scatter_dim);
  std::vector<at::Tensor> packed;
  for (const auto& b : blocks) packed.push_back(b.contiguous().reshape({-1}));
  at::Tensor recv = exchange(comm, at::cat(packed, 0));
  std::vector<at::Tensor> received;
  for (const auto& r : recv.chunk(world, 0)) received.push_back(r.view(blocks[0].sizes()));
  return at::cat(received, gather_dim).contiguous();
}

class UlyssesGatherSeqScatterHeadsQkv : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{38, "ulysses_gather_seq_scatter_heads_qkv",
                                    "Ulysses all-to-all on a packed QKV projection: gather sequence, scatter heads "
                                    "inside each of Q, K, V",
                                    "Context Parallel", "VeOmni / verl gather_seq_scatter_heads_qkv",
                                    "W divides 8 (asserted)"};
    return s;
  }

  std::string check_world(int world) const override {
    if (world < 1 || kHeads % world != 0) return "the world size must divide the 8 attention heads";
    return "";
  }

  // Inputs: qkv_tensor (B, T, 3*8*64) randn with B = max(1, M/64),
  // T = max(1, N/64), seq_dim 1, group (None = WORLD), unpadded_dim_size None,
  // restore_shape true.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    PKB_CHECK(kHeads % req.world == 0, "problem 38 needs W to divide the 8 heads (W = ", req.world, ")");
    const int64_t b = std::max<int64_t>(1, req.m / 64), t = std::max<int64_t>(1, req.n / 64);
    pkb::Inputs in;
    in.add("qkv_tensor",
           at::randn({b, t, 3 * kHeads * kHeadDim}, at::TensorOptions().dtype(req.dtype).device(req.device)));
    in.add("seq_dim", int64_t{1});
    in.add("group", pkb::None{});
    in.add("unpadded_dim_size", pkb::None{});
    in.add("restore_shape", true);
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int64_t world = comm.world_size();
    const at::Tensor& qkv = in.tensor(0);
    const int64_t seq_dim = in.integer(1);
    // None (the published default) reads as 0.
    const int64_t unpadded = std::holds_alternative<pkb::None>(in.at(3).value) ? 0 : in.integer(3);
    const bool restore_shape = in.boolean(4);

    const std::vector<int64_t> orig = qkv.sizes().vec();
    const int64_t proj = orig.back();
    // The scattered dim is the original rank (the new last dim after the view).
    const int64_t scatter_dim = qkv.dim();
    std::vector<int64_t> split(orig.begin(), orig.end() - 1);
    split.push_back(3);
    split.push_back(proj / 3);
    at::Tensor x = all_to_all_tensor(comm, qkv.view(split), scatter_dim, /*gather_dim=*/seq_dim);
    if (restore_shape) {
      std::vector<int64_t> out_shape = orig;
      out_shape[seq_dim] *= world;
      out_shape.back() = proj / world;
      x = x.view(out_shape);
    }
    // Never taken with the benchmark's inputs (unpadded_dim_size is None).
    if (unpadded != 0 && unpadded % world != 0) {
      const int64_t padding = x.size(seq_dim) - unpadded;
      x = x.narrow(seq_dim, 0, x.size(seq_dim) - padding);
    }
    return {x};
  }

  // (W-1)/W of the tensor leaves and as much arrives; HBM: read once, the
  // output written once.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& x = in.tensor(0);
    const double bytes = static_cast<double>(x.numel()) * x.element_size(), w = world;
    pkb::Cost c;
    c.nvlink_bytes_per_rank = (w - 1) / w * bytes;
    c.hbm_bytes_per_rank = 2.0 * bytes;
    c.flops_per_rank = 0;
    return c;
  }
};

}  // namespace

PKB_PROBLEM(UlyssesGatherSeqScatterHeadsQkv)
