// Distributed Sinkhorn-Knopp normalisation of teacher prototype scores
// (DINOv2 `sinkhorn_knopp_teacher`): the batch is sharded over the ranks, the
// prototype (row) sums and the total mass are all-reduced, the per-sample
// (column) sums stay local. Everything is float32, whatever the run's dtype,
// as published; the in-place updates run on a transposed view, as published.
#include "pkb/integrity.h"
#include "pkb/memory_estimate.h"
#include "pkb/problem.h"

#include <algorithm>

namespace {

const pkb::ProblemSpec kSpec{80, "dinov2_distributed_sinkhorn_knopp",
                             "Distributed Sinkhorn-Knopp normalisation of teacher prototype scores", "Data Parallel",
                             "DINOv2 (sinkhorn_knopp_teacher of the DINO/iBOT loss)", "any"};

constexpr int64_t kPrototypes = 16384;

class DinoSinkhornKnopp : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Bl = max(512, min(M, 1024)) samples per rank, 16384 prototypes;
  // teacher_output = 0.01 * randn, float32 (the run's dtype is ignored).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const int64_t local_batch = std::max<int64_t>(512, std::min<int64_t>(req.m, 1024));
    at::Tensor teacher = at::randn({local_batch, kPrototypes}, req.options(at::kFloat)) * 0.01;
    at::Tensor n_masked = at::full({1}, local_batch, req.options(at::kLong));
    return {{"teacher_output", teacher.contiguous()}, {"teacher_temp", 0.07}, {"n_masked_patches_tensor", n_masked},
            {"n_iterations", int64_t{3}}, {"group", pkb::None{}}};
  }

  // NOTE [integrity trials] (pkb/integrity.h): with 0.01·randn scores at
  // temperature 0.07 the transport plan is nearly uniform, every entry about
  // 1/16384, far below the tolerance: all zeros passed, and so did a cached
  // answer. Here the scores are 0.3·randn (this rank's seed): exp(score/T)
  // spans ~e^±23, so each prototype's mass goes mostly to the few samples
  // that score it highest and entries up to several 1e-2 appear, where they
  // depend on every rank's scores (no float32 underflow at this spread).
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = make_inputs(req);
    const at::Tensor& published = in.tensor(0);
    at::manual_seed(req.seed);
    in.args()[0].value = (at::randn(published.sizes(), published.options()) * 0.3).contiguous();
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& teacher = in.tensor(0);
    const double temp = in.real(1);
    const at::Tensor& n_masked = in.tensor(2);
    const int64_t iterations = in.integer(3);
    at::Tensor q = at::exp(teacher.to(at::kFloat) / temp).t();  // (K, Bl) view
    at::Tensor total_batch = n_masked.to(q.device(), q.scalar_type()).clone();
    comm.all_reduce(total_batch);
    const int64_t num_prototypes = q.size(0);
    at::Tensor total_mass = q.sum();
    comm.all_reduce(total_mass);
    q.div_(total_mass);
    for (int64_t it = 0; it < iterations; ++it) {
      at::Tensor row_sum = q.sum(1, /*keepdim=*/true);
      comm.all_reduce(row_sum);
      q.div_(row_sum);
      q.div_(num_prototypes);
      q.div_(q.sum(0, /*keepdim=*/true));
      q.div_(total_batch);
    }
    q.mul_(total_batch);
    return {q.t().contiguous()};
  }

  // NVLink: all-reduces of 1 (count) + 1 (mass) + n_iter * K float32 values,
  // 2(W-1)/W of each. HBM: the scores read once and the output written once
  // (a fused kernel keeping the Bl x K block on chip; the reference makes
  // ~10 passes). FLOPs: exp + divide, then per iteration a row-sum add, two
  // divides, a column-sum add and a divide, then the final multiply:
  // (2 + 5 n_iter + 1) per element (= 18 at n_iter 3).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);
    const double elems = static_cast<double>(t.numel()), w = world;
    const double iters = static_cast<double>(in.integer(3)), k = static_cast<double>(t.size(1));
    return {/*nvlink_bytes_per_rank=*/2.0 * (w - 1) / w * 4.0 * (2.0 + iters * k),
            /*hbm_bytes_per_rank=*/2.0 * elems * 4.0,
            /*flops_per_rank=*/(3.0 + 5.0 * iters) * elems};
  }
};

// NOTE [memory admission]. Measured on CPU at 128x128 (the largest rank's
// VmHWM, reference run, one trial): 2.48 GiB at W=2 timed, 0.83 GiB untimed,
// 0.85 GiB at W=4 untimed; the timing's input groups (NOTE [timing protocol]:
// up to 3x the last-level cache per side, 320 MiB there) make most of it.
// Declared: 2.75 GiB per rank on CPU up to the measured 128x128 (larger:
// unknown); unknown (0) on a GPU.
int64_t memory_estimate(int world, int64_t m, int64_t n, bool cuda) {
  return cuda || m * n > 128 * 128 ? 0 : int64_t{11} << 28;
}

}  // namespace

PKB_MEMORY_ESTIMATE(memory_estimate)
PKB_PROBLEM(DinoSinkhornKnopp)
