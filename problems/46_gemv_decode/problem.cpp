// Vocab-sharded LM-head GEMV for decode: a column-parallel linear with bias
// (each rank holds Vloc = vocab/W rows of the output projection), then an
// all-gather of the local logits concatenated along the vocabulary. The
// published reference rounds twice: the GEMM output to bf16, then the bias add
// (catalog §46). All tensors are drawn with the rank term of the seed fixed to
// 0, so every rank sees the same hidden state and its own shard of one weight.
#include "../blocks/shared_seed_draw.h"
#include "pkb/integrity.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{46, "gemv_decode", "Vocab-sharded LM-head GEMV (decode) with bias, then logits all-gather",
                             "Tensor Parallel", "Megatron-style ColumnParallelLinear with gathered output (not stated)",
                             "any"};

using namespace pkb::blocks;

class GemvDecode : public pkb::ProblemWithSpec<kSpec, SharedSeedDraw> {
 public:
  // num_tokens = max(1, min(8, M/1024)), hidden = max(128, min(N, 4096)),
  // vocab = roundup(max(M, 1024·W), W), Vloc = vocab/W. Seed(46, 0, trial) on
  // every rank; RNG order: hidden_states, full weight, full bias; each rank
  // keeps rows [r·Vloc, (r+1)·Vloc).
  pkb::Inputs draw(const pkb::InputRequest& req, uint64_t seed) const override {
    at::manual_seed(seed);
    auto opts = req.options();
    const int64_t w = req.world;
    const int64_t tokens = std::max<int64_t>(1, std::min<int64_t>(8, req.m / 1024));
    const int64_t hidden = std::max<int64_t>(128, std::min<int64_t>(req.n, 4096));
    const int64_t vocab = (std::max<int64_t>(req.m, 1024 * w) + w - 1) / w * w;
    const int64_t local = vocab / w;
    at::Tensor h = at::randn({tokens, hidden}, opts);
    at::Tensor full_weight = at::randn({vocab, hidden}, opts);
    at::Tensor full_bias = at::randn({vocab}, opts);
    return {{"hidden_states", h}, {"weight_shard", full_weight.narrow(0, req.rank * local, local).contiguous()},
            {"bias_shard", full_bias.narrow(0, req.rank * local, local).contiguous()}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    at::Tensor logits = at::matmul(in.tensor(0), in.tensor(1).t());  // rounded to bf16
    logits = logits + in.tensor(2);                                  // a second rounding
    logits = logits.contiguous();
    std::vector<at::Tensor> gathered;
    for (int s = 0; s < comm.world_size(); ++s) gathered.push_back(at::empty_like(logits));
    comm.all_gather(gathered, logits);
    return {at::cat(gathered, 1)};
  }

  // With T tokens, hidden H, Vloc local rows and e bytes per element:
  // NVLink (W-1)·T·Vloc·e (the foreign logits received); HBM the weight shard,
  // the hidden state and the bias read, the (T, W·Vloc) logits written;
  // FLOPs 2·T·H·Vloc (GEMV) + T·Vloc (bias).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [h, wt] = in.tensors<2>();
    const double t = static_cast<double>(h.size(0)), hid = static_cast<double>(h.size(1));
    const double vloc = static_cast<double>(wt.size(0)), e = static_cast<double>(wt.element_size());
    const double w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) * t * vloc * e,
            /*hbm_bytes_per_rank=*/(vloc * hid + t * hid + vloc + w * t * vloc) * e,
            /*flops_per_rank=*/2.0 * t * hid * vloc + t * vloc};
  }
};

}  // namespace

PKB_PROBLEM(GemvDecode)
