// Sequence-parallel MLP (the Megatron-LM pattern): all-gather the column-sharded
// activations, GEMM, SiLU, keep this rank's row chunk, GEMM, and a sum
// reduce-scatter of a zero buffer holding only this rank's block. Rounding
// points matter (catalog §15): the first GEMM's output and the SiLU are each
// rounded to bf16. The reference computes the first GEMM for all rows and
// discards (W-1)/W of them, and its reduce-scatter adds only zeros from the
// other ranks; both are reproduced as published.
#include "../blocks/round_up.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{15, "combined_sharded_gemms",
                             "Sequence-parallel MLP: all-gather, GEMM, SiLU, GEMM, reduce-scatter", "Tensor Parallel",
                             "Megatron-LM sequence-parallel MLP (AG before, RS after)", "any"};

constexpr int64_t kHidden = 256;  // H before rounding up to a multiple of W
constexpr int64_t kFfn = 512;     // F

using pkb::blocks::round_up;

class CombinedShardedGemms : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published: x_local, W1, W2. M and H are rounded up to
  // multiples of W so that every world size works.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    const int64_t m_rows = round_up(req.m, req.world), h = round_up(kHidden, req.world);
    at::Tensor x_local = at::randn({m_rows, h / req.world}, opts);
    at::Tensor w1 = at::randn({h, kFfn}, opts);
    at::Tensor w2 = at::randn({kFfn, h}, opts);
    return {{"x_local", x_local}, {"W1", w1}, {"W2", w2}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor x_local = in.tensor(0).contiguous();
    const at::Tensor& w1 = in.tensor(1);
    const at::Tensor& w2 = in.tensor(2);
    const int64_t rank = comm.rank(), world = comm.world_size();
    const int64_t m = x_local.size(0), m_local = m / world;
    std::vector<at::Tensor> shards;
    for (int64_t s = 0; s < world; ++s) shards.push_back(at::empty_like(x_local));
    comm.all_gather(shards, x_local);
    at::Tensor x_full = at::cat(shards, 1);
    at::Tensor a = at::silu(at::matmul(x_full, w1));
    at::Tensor a_loc = a.slice(0, rank * m_local, (rank + 1) * m_local).contiguous();
    at::Tensor block = at::matmul(a_loc, w2);
    const int64_t h = block.size(1);
    at::Tensor buf = at::zeros({m, h}, block.options());
    buf.slice(0, rank * m_local, (rank + 1) * m_local).copy_(block);
    at::Tensor y_local = at::empty({m_local, h}, block.options());
    comm.reduce_scatter_tensor(y_local, buf, pkb::ReduceOp::kSum);
    return {y_local};
  }

  // What the result needs, not what the reference moves: rank r's output only
  // depends on rows chunk r of x_full, so it must receive (W-1) column shards of
  // M_rows/W rows (and send as much); HBM: those rows, W1, W2 read and the
  // output written; 4·(M_rows/W)·H·F flops for the two GEMMs on its rows.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [x_local, w1] = in.tensors<2>();
    const double m_rows = static_cast<double>(x_local.size(0)), h_local = static_cast<double>(x_local.size(1));
    const double h = static_cast<double>(w1.size(0)), f = static_cast<double>(w1.size(1));
    const double e = static_cast<double>(x_local.element_size()), w = world;
    const double rows = m_rows / w;
    return {/*nvlink_bytes_per_rank=*/(w - 1) * rows * h_local * e,
            /*hbm_bytes_per_rank=*/(rows * h + 2.0 * h * f + rows * h) * e,
            /*flops_per_rank=*/4.0 * rows * h * f};
  }
};

}  // namespace

PKB_PROBLEM(CombinedShardedGemms)
