// Gradient-accumulation loss normalisation by the global number of valid
// tokens (forward + closed-form backward). Rounding order matters (catalog
// §23): the local loss_sum is a bf16 product and is all-reduced in bf16, so a
// nearly cancelling sum over ranks is only reproduced by the same bf16 adds.
#include <algorithm>

#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{23, "grad_acc_loss", "Token-count-weighted loss normalisation across data-parallel ranks",
                             "Data Parallel", "VeOmni / torchtitan (gradient-accumulation loss normaliser)", "any"};

class GradAccLoss : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Only the loss is random; the token counts are M*N per rank and W*M*N in
  // total, the upstream gradients 1 and 0, as published.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    at::Tensor loss = at::randn({}, req.options());
    return {{"loss", loss}, {"local_valid_tokens", at::full({}, req.m * req.n, req.options(at::kLong))},
            {"global_valid_tokens", at::full({}, req.world * req.m * req.n, req.options(at::kLong))},
            {"grad_normalized_loss", at::ones({}, req.options())},
            {"grad_loss_sum", at::zeros({}, req.options())}};
  }

  // Integrity trials (NOTE [integrity trials], pkb/integrity.h): the published
  // token counts and upstream gradients are constants (grad_loss = 1/W from
  // rank and world alone). Here every rank's count differs (a function of
  // rank and trial only, so every rank can form the global sum without
  // communication) and both upstream gradients are drawn.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    const int64_t full = req.m * req.n, half = std::max<int64_t>(1, full / 2);
    auto local_of = [&](int64_t r) { return half + (r * 7919 + (req.trial + 1) * 104729) % half; };
    int64_t global = 0;
    for (int64_t r = 0; r < req.world; ++r) global += local_of(r);
    return {{"loss", at::randn({}, req.options())},
            {"local_valid_tokens", at::full({}, local_of(req.rank), req.options(at::kLong))},
            {"global_valid_tokens", at::full({}, global, req.options(at::kLong))},
            {"grad_normalized_loss", at::randn({}, req.options())},
            {"grad_loss_sum", at::randn({}, req.options())}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    at::Tensor loss = in.tensor(0);
    const at::Tensor& local_valid = in.tensor(1);
    const at::Tensor& global_valid = in.tensor(2);
    const at::Tensor& grad_normalized = in.tensor(3);
    const at::Tensor& grad_loss_sum = in.tensor(4);
    // The published forward checks on the host; a rank without tokens must not
    // poison the sum with NaN/inf.
    if (local_valid.item<int64_t>() == 0) loss = at::nan_to_num(loss);
    // bf16 x int64 0-d tensors: the count is converted to bf16, the product rounded to bf16.
    at::Tensor loss_sum = loss * local_valid;
    comm.all_reduce(loss_sum, pkb::ReduceOp::kSum);
    at::Tensor normalized = loss_sum / global_valid;
    at::Tensor grad_from_normalized = grad_normalized * local_valid / global_valid;
    at::Tensor grad_from_sum = grad_loss_sum * local_valid;
    at::Tensor grad_loss = grad_from_normalized + grad_from_sum;
    return {normalized, loss_sum, grad_loss};
  }

  // One all-reduce of a single element (bandwidth-optimal: 2(W-1)/W of it each
  // way); five scalars read, three written; a handful of scalar flops.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const double e = static_cast<double>(in.tensor(0).element_size()), w = world;
    double read = 0;
    for (size_t i = 0; i < 5; ++i) read += static_cast<double>(in.tensor(i).nbytes());
    return {/*nvlink_bytes_per_rank=*/2.0 * (w - 1) / w * e,
            /*hbm_bytes_per_rank=*/read + 3.0 * e,
            /*flops_per_rank=*/7.0};
  }
};

}  // namespace

PKB_PROBLEM(GradAccLoss)
