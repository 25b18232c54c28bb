// SAM 3 multi-GPU tracker object suppression: every rank's object masks
// (uneven counts) and scores are all-gathered (float32), then duplicates are
// suppressed from the global pairwise IoU of the binarised masks and the
// objects' last-occluded frame indices. Identical outputs on every rank.
#include "pkb/integrity.h"
#include "pkb/problem.h"

#include <string>
#include <vector>

namespace {

const pkb::ProblemSpec kSpec{81, "sam3_allgather_iou_suppression",
                             "All-gather of per-GPU object masks (uneven counts), then global IoU suppression",
                             "Data Parallel", "SAM 3 (multi-GPU video tracker object suppression)", "any"};

constexpr int64_t kHeight = 256, kWidth = 256;
constexpr double kNoObjLogit = -10.0;

std::vector<int64_t> counts_for(int world, int trial) {
  std::vector<int64_t> c;
  for (int d = 0; d < world; ++d) c.push_back(1 + (d + trial) % 3);
  return c;
}

// Uneven all-gather along dim 0 (rank order). torch.distributed.all_gather
// with unequal output sizes runs as one broadcast per rank on NCCL; the same
// broadcasts here work on every backend.
at::Tensor all_gather_variable(pkb::Collectives& comm, const at::Tensor& t, const std::vector<int64_t>& counts) {
  const int world = comm.world_size(), rank = comm.rank();
  std::vector<at::Tensor> recv;
  for (int i = 0; i < world; ++i) {
    std::vector<int64_t> shape = t.sizes().vec();
    shape[0] = counts[i];
    at::Tensor r = i == rank ? t.contiguous().clone() : at::empty(shape, t.options());
    comm.broadcast(r, i);
    recv.push_back(r);
  }
  return at::cat(recv, 0);
}

at::Tensor mask_iou(const at::Tensor& lhs, const at::Tensor& rhs) {
  at::Tensor l = lhs.flatten(1).to(at::kFloat), r = rhs.flatten(1).to(at::kFloat);
  at::Tensor inter = at::matmul(l, r.t());
  at::Tensor la = l.sum(1), ra = r.sum(1);
  at::Tensor uni = la.unsqueeze(1) + ra.unsqueeze(0) - inter;
  return inter / uni.clamp_min(1.0);
}

at::Tensor suppression_mask(const at::Tensor& masks, const at::Tensor& last, double thr, bool reverse) {
  const int64_t n = masks.size(0);
  at::Tensor suppress = at::zeros({n}, at::TensorOptions().dtype(at::kBool).device(masks.device()));
  if (n <= 1) return suppress;
  at::Tensor overlaps = at::triu(mask_iou(masks, masks).ge(thr), 1);
  at::Tensor li = last.view({n, 1}), lj = last.view({1, n});
  at::Tensor si = overlaps & (reverse ? li.lt(lj) : li.gt(lj)) & lj.gt(-1);
  at::Tensor sj = overlaps & (reverse ? lj.lt(li) : lj.gt(li)) & li.gt(-1);
  return si.any(1) | sj.any(0);
}

class Sam3IouSuppression : public pkb::ProblemWithSpec<kSpec> {
 public:
  // counts[d] = 1 + (d + trial) mod 3 objects on rank d. Masks
  // bf16(bf16(randn + 4·pattern) − 1), pattern[i,y,x] = (y+x+i+rank) mod 5 == 0;
  // scores linspace(−5, 5, n); last_occluded[j] = j mod 5 − 1 (global, same on all ranks).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    std::vector<int64_t> counts = counts_for(req.world, req.trial);
    const int64_t n = counts[req.rank];
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    at::Tensor masks = at::randn({n, kHeight, kWidth}, req.options());
    at::Tensor yy = at::arange(kHeight, req.options(at::kLong)).view({1, kHeight, 1});
    at::Tensor xx = at::arange(kWidth, req.options(at::kLong)).view({1, 1, kWidth});
    at::Tensor centers = at::arange(n, req.options(at::kLong)).view({n, 1, 1});
    at::Tensor pattern = at::remainder(yy + xx + centers + req.rank, 5).eq(0).to(req.dtype);
    masks = masks + pattern * 4.0 - 1.0;
    at::Tensor scores = at::linspace(-5.0, 5.0, n, req.options());
    at::Tensor last = at::remainder(at::arange(total, req.options(at::kLong)), 5) - 1;
    pkb::Inputs in{{"low_res_masks_local", masks.contiguous()}, {"obj_scores_local", scores.contiguous()}};
    for (size_t d = 0; d < counts.size(); ++d) in.add("num_obj_per_gpu." + std::to_string(d), counts[d]);
    in.add("last_occluded", last.contiguous());
    in.add("iou_threshold", 0.7);
    in.add("reverse", false);
    in.add("group", pkb::None{});
    return in;
  }

  // NOTE [integrity trials] (pkb/integrity.h): the published masks overlap
  // with an IoU of about 0.5 at most, so nothing is ever suppressed and the
  // suppression output is all false (an answer that skips the IoU test
  // passed). Here, from a seed every rank shares, every object j of the world
  // is one of max(1, T/3) random rectangles (sides 40–120 pixels; so several
  // objects, on one rank or on different ones, are the same rectangle: IoU
  // near 1) and last_occluded[j] is uniform in [-1, 3]; each rank's masks
  // are ±3 in / out of its objects' rectangles plus this rank's randn, and
  // its scores randn. The counts stay the published function of the trial.
  // Some pair is suppressed in 76-99 % of the draws at W = 2 and 95-99 % at
  // W = 4 (counted over the draw's distribution), so across the integrity
  // trials and the refresh an answer that never suppresses fails.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = make_inputs(req);
    std::vector<int64_t> counts = counts_for(req.world, req.trial);
    int64_t total = 0, offset = 0;
    for (int d = 0; d < req.world; ++d) {
      if (d < req.rank) offset += counts[d];
      total += counts[d];
    }
    const int64_t n = counts[req.rank], shapes = std::max<int64_t>(1, total / 3);
    const auto cpu = at::TensorOptions();
    at::manual_seed(pkb::integrity_shared_seed(req));
    at::Tensor side = at::randint(40, 121, {shapes, 2}, cpu.dtype(at::kLong));
    at::Tensor corner = (at::rand({shapes, 2}, cpu.dtype(at::kDouble)) * (256 - side).to(at::kDouble)).to(at::kLong);
    at::Tensor shape_of = at::randint(0, shapes, {total}, cpu.dtype(at::kLong));
    at::Tensor last = at::randint(-1, 4, {total}, cpu.dtype(at::kLong));
    at::manual_seed(req.seed);
    at::Tensor yy = at::arange(kHeight, cpu.dtype(at::kLong)).view({1, kHeight, 1});
    at::Tensor xx = at::arange(kWidth, cpu.dtype(at::kLong)).view({1, 1, kWidth});
    at::Tensor mine = shape_of.narrow(0, offset, n);
    auto col = [&](const at::Tensor& t, int64_t c) { return t.index_select(0, mine).select(1, c).view({n, 1, 1}); };
    at::Tensor inside = yy.ge(col(corner, 0)) & yy.lt(col(corner, 0) + col(side, 0)) & xx.ge(col(corner, 1)) &
                        xx.lt(col(corner, 1) + col(side, 1));
    at::Tensor masks = inside.to(at::kFloat) * 6.0 - 3.0 + at::randn({n, kHeight, kWidth}, cpu.dtype(at::kFloat));
    at::Tensor scores = at::randn({n}, cpu.dtype(at::kFloat));
    in.args()[0].value = masks.to(in.tensor(0).scalar_type()).contiguous().to(req.device);
    in.args()[1].value = scores.to(in.tensor(1).scalar_type()).contiguous().to(req.device);
    in.args()[2 + req.world].value = last.contiguous().to(req.device);
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size(), rank = comm.rank();
    const auto [masks_in, scores_in] = in.tensors<2>();
    std::vector<int64_t> counts;
    for (int d = 0; d < world; ++d) counts.push_back(in.integer(2 + d));
    const at::Tensor& last_in = in.tensor(2 + world);
    const double thr = in.real(3 + world);
    const bool reverse = in.boolean(4 + world);
    PKB_CHECK(masks_in.size(0) == counts[rank], "local mask count does not match num_obj_per_gpu");
    PKB_CHECK(scores_in.size(0) == counts[rank], "local score count does not match num_obj_per_gpu");
    at::Tensor masks_local = masks_in.to(at::kFloat).contiguous();
    at::Tensor scores_local = scores_in.to(at::kFloat).contiguous();
    at::Tensor masks = all_gather_variable(comm, masks_local, counts);
    at::Tensor scores = all_gather_variable(comm, scores_local, counts);
    at::Tensor last = last_in.to(masks.device(), at::kLong);
    at::Tensor suppress = suppression_mask(masks.gt(0), last, thr, reverse);
    masks.index_put_({suppress}, kNoObjLogit);
    return {masks, scores, suppress};
  }

  // T objects in all, n here, P = 256·256 pixels. NVLink: the other ranks'
  // masks and scores, (T − n)·(4P + 4) bytes received. HBM: the local masks
  // read (2nP), the gathered masks written (4TP) and read for the binary IoU
  // GEMM (4TP). FLOPs: the IoU GEMM 2·T²·P plus the binarisation and the area
  // sums (2TP).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& m = in.tensor(0);
    const double p = static_cast<double>(kHeight * kWidth), n = static_cast<double>(m.size(0));
    double t = 0;
    for (int d = 0; d < world; ++d) t += static_cast<double>(in.integer(2 + d));
    return {/*nvlink_bytes_per_rank=*/(t - n) * (4.0 * p + 4.0),
            /*hbm_bytes_per_rank=*/n * p * m.element_size() + 8.0 * t * p,
            /*flops_per_rank=*/2.0 * t * t * p + 2.0 * t * p};
  }
};

}  // namespace

PKB_PROBLEM(Sam3IouSuppression)
