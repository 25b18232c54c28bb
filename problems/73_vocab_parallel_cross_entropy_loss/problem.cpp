// Megatron-LM vocab-parallel cross-entropy forward: every rank holds a
// contiguous slice of the vocabulary; the row max, the target logit and the
// sum of exponentials are all-reduced (MAX, SUM, SUM, all bf16) (catalog §73).
// As published, the logits are shifted by the max **in place** (the input is
// mutated), and every op on bf16 rounds to bf16.
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{73, "vocab_parallel_cross_entropy_loss",
                             "Vocab-parallel cross-entropy forward (max, target-logit and sum-exp all-reduces)",
                             "Vocab Parallel", "Megatron-LM (_VocabParallelCrossEntropy forward)", "W divides 512"};

constexpr int64_t kBatch = 8;
constexpr int64_t kSeq = 1024;
constexpr int64_t kVocab = 512;

class VocabParallelCrossEntropyLoss : public pkb::ProblemWithSpec<kSpec> {
 public:
  std::string check_world(int world) const override {
    return world >= 1 && kVocab % world == 0 ? "" : "the world size must divide the vocabulary size 512";
  }

  // Fixed shapes. RNG: the logits only; the targets are arithmetic, the same
  // on every rank, and shift with the trial.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in;
    in.add("vocab_parallel_logits", at::randn({kBatch, kSeq, kVocab / req.world}, req.options()));
    at::Tensor ids = at::arange(kBatch * kSeq, req.options(at::kLong));
    in.add("target", (ids * 13 + 7 + req.trial).remainder(kVocab).reshape({kBatch, kSeq}));
    in.add("group", pkb::None{});
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    at::Tensor logits = in.tensor(0);  // shares storage: mutated below, as published
    const at::Tensor& target = in.tensor(1);
    const int rank = comm.rank();

    at::Tensor logits_max = std::get<0>(logits.max(-1));
    comm.all_reduce(logits_max, pkb::ReduceOp::kMax);
    logits.sub_(logits_max.unsqueeze(-1));

    const int64_t part = logits.size(-1);
    const int64_t vocab_start = rank * part, vocab_end = vocab_start + part;
    at::Tensor target_mask = target.lt(vocab_start).logical_or(target.ge(vocab_end));
    at::Tensor masked_target = (target - vocab_start).masked_fill(target_mask, 0);

    at::Tensor logits_2d = logits.reshape({-1, part});
    at::Tensor target_1d = masked_target.reshape({-1});
    at::Tensor row_ids = at::arange(logits_2d.size(0), target.options());
    at::Tensor predicted = logits_2d.index({row_ids, target_1d}).clone().reshape_as(target);
    predicted = predicted.masked_fill(target_mask, 0.0);
    comm.all_reduce(predicted, pkb::ReduceOp::kSum);

    at::Tensor sum_exp = at::exp(logits).sum(-1);
    comm.all_reduce(sum_exp, pkb::ReduceOp::kSum);
    return {at::log(sum_exp) - predicted};
  }

  // Three all-reduces of B*S bf16 values (2(W-1)/W of the bytes each);
  // HBM: the logits read and written back (the in-place shift), the targets
  // read, the loss written; ~3 flops per logit (sub, exp, add).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& l = in.tensor(0);
    const double e = static_cast<double>(l.element_size()), n = static_cast<double>(l.numel());
    const double rows = static_cast<double>(in.tensor(1).numel()), w = world;
    return {/*nvlink_bytes_per_rank=*/3.0 * 2.0 * (w - 1) / w * rows * e,
            /*hbm_bytes_per_rank=*/2.0 * n * e + rows * 8.0 + rows * e,
            /*flops_per_rank=*/3.0 * n};
  }
};

}  // namespace

PKB_PROBLEM(VocabParallelCrossEntropyLoss)
