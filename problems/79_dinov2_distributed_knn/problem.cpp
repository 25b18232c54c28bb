// DINOv2 distributed k-NN retrieval: for each owner rank in turn, its
// queries are broadcast, every rank scores them against its train shard
// (bf16 GEMM) and keeps its top-k (values and labels), and the owner gathers
// the W candidate blocks and takes the top-k of their concatenation.
//
// Ties: bf16 similarities tie often, and tied entries carry different
// labels. The published reference calls torch.topk on CUDA; its recorded
// outputs equal a *stable* descending sort (lower column index first, in the
// shard and then in the rank-order concatenation), measured on both golden
// files. CPU at::topk orders ties differently (3146 and 3211 of 6400 labels
// differed), so the reference takes the top-k as the first k of a stable
// descending sort, on every device: the tie rule is part of the contract.
#include "../blocks/cpu_order_on_replay.h"
#include "pkb/problem.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace {

const pkb::ProblemSpec kSpec{79, "dinov2_distributed_knn",
                             "Distributed k-NN retrieval: broadcast queries, local top-k, owner merges",
                             "Data Parallel", "DINOv2 (k-NN evaluation)", "any"};

// `cpu_order`: the published CPU topk itself, for replaying the Gloo
// recordings (NOTE [recording device] in pkb/published_on.h).
std::pair<at::Tensor, at::Tensor> topk_with_labels(const at::Tensor& sim, const at::Tensor& labels, int64_t k,
                                                   bool cpu_order) {
  if (cpu_order) {
    auto [values, idx] = at::topk(sim.cpu(), k, 1, /*largest=*/true, /*sorted=*/true);
    at::Tensor lab = at::gather(labels.cpu().expand({sim.size(0), -1}), 1, idx);
    return {values.to(sim.device()), lab.to(sim.device())};
  }
  auto [values, idx] = sim.sort(/*stable=*/true, 1, /*descending=*/true);
  idx = idx.narrow(1, 0, k);
  at::Tensor lab = at::gather(labels.expand({sim.size(0), -1}), 1, idx);
  return {values.narrow(1, 0, k).contiguous(), lab};
}

using namespace pkb::blocks;

class DinoDistributedKnn : public pkb::ProblemWithSpec<kSpec, CpuOrderOnReplay> {
 public:
  // Q = max(32, min(M/64, 256)) queries, Tn = max(1024, min(16N/W, 16384))
  // train rows, D = 384 (768 if N >= 4096, 1024 if N >= 8192); bf16 randn,
  // row-L2-normalised in bf16 (test first, then train), cast to the run's
  // dtype; train stored transposed (D, Tn); labels (r·Tn + j) mod 1000.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const int64_t queries = std::max<int64_t>(32, std::min<int64_t>(req.m / 64, 256));
    const int64_t train = std::max<int64_t>(1024, std::min<int64_t>(req.n * 16 / std::max(req.world, 1), 16384));
    int64_t dim = 384;
    if (req.n >= 4096) dim = 768;
    if (req.n >= 8192) dim = 1024;
    const int64_t max_k = std::min<int64_t>(200, train);
    at::Tensor test = at::randn({queries, dim}, req.options(at::kBFloat16));
    at::Tensor trainf = at::randn({train, dim}, req.options(at::kBFloat16));
    // F.normalize(x, p=2, dim=1): x / max(||x||, eps), the norm in bf16 and
    // the division by its expansion.
    auto normalize = [](const at::Tensor& x) {
      at::Tensor denom = x.norm(2, {1}, /*keepdim=*/true).clamp_min(1e-12).expand_as(x);
      return x / denom;
    };
    test = normalize(test);
    trainf = normalize(trainf);
    at::Tensor labels =
        at::remainder(req.rank * train + at::arange(train, req.options(at::kLong)), 1000).view({1, train});
    return {{"test_features_rank", test.to(req.dtype).contiguous()},
            {"train_features_rank_T", trainf.to(req.dtype).t().contiguous()},
            {"train_labels_rank", labels.contiguous()}, {"max_k", max_k}, {"group", pkb::None{}}};
  }

  // Q queries of D features (e bytes), Tn train rows, k candidates. NVLink:
  // this rank receives the W-1 other query blocks (Q·D·e each) and, as an
  // owner, W-1 candidate blocks (Q·k·(e + 8)). HBM: the train shard read
  // once per owner (W·D·Tn·e) plus the queries and labels. FLOPs: the W
  // similarity GEMMs, W·2·Q·D·Tn.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [test, train_t] = in.tensors<2>();
    const double q = static_cast<double>(test.size(0)), d = static_cast<double>(test.size(1));
    const double tn = static_cast<double>(train_t.size(1)), k = static_cast<double>(in.integer(3));
    const double e = static_cast<double>(test.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) * (q * d * e + q * k * (e + 8.0)),
            /*hbm_bytes_per_rank=*/w * (d * tn * e + q * d * e) + 8.0 * tn + q * k * (e + 8.0),
            /*flops_per_rank=*/w * 2.0 * q * d * tn};
  }

 private:
  pkb::Outputs forward(pkb::Collectives& comm, const pkb::Inputs& in, bool cpu_order) const override {
    const auto [test, train_t, labels] = in.tensors<3>();
    const int64_t k = in.integer(3);
    const int world = comm.world_size(), rank = comm.rank();
    PKB_CHECK(k <= train_t.size(1), "max_k must not exceed the local train shard size");
    at::Tensor result_sims, result_labels;
    for (int owner = 0; owner < world; ++owner) {
      // The owner's query shape, then its queries.
      at::Tensor shape = at::tensor(test.sizes().vec(), at::TensorOptions().dtype(at::kLong)).to(test.device());
      comm.broadcast(shape, owner);
      at::Tensor queries;
      if (rank == owner) {
        queries = test.contiguous();
      } else {
        at::Tensor s = shape.cpu();
        queries = at::empty({s[0].item<int64_t>(), s[1].item<int64_t>()}, test.options());
      }
      comm.broadcast(queries, owner);
      at::Tensor sim = at::matmul(queries, train_t);
      auto [sims, labs] = topk_with_labels(sim, labels, k, cpu_order);
      std::vector<at::Tensor> gs, gl;
      if (rank == owner) {
        for (int i = 0; i < world; ++i) {
          gs.push_back(at::empty_like(sims));
          gl.push_back(at::empty_like(labs));
        }
      }
      comm.gather(sims, rank == owner ? &gs : nullptr, owner);
      comm.gather(labs, rank == owner ? &gl : nullptr, owner);
      if (rank == owner) {
        std::tie(result_sims, result_labels) = topk_with_labels(at::cat(gs, 1), at::cat(gl, 1), k, cpu_order);
      }
    }
    return {result_sims, result_labels};
  }
};

}  // namespace

PKB_PROBLEM(DinoDistributedKnn)
