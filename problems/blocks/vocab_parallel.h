// Vocab-parallel token log-probabilities under top-k / top-p filtering (the
// NeMo-RL GRPO log-prob path, inferred: 82, 83 and the backward 84): the
// logits sharded over a 256-word vocabulary, the all-to-all to full-vocab
// logits of a token shard, the published _apply_top_k_top_p, and the
// published and integrity draws of logits and targets.
#pragma once

#include <algorithm>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "../blocks/round_up.h"
#include "pkb/check.h"
#include "pkb/collectives.h"
#include "pkb/integrity.h"
#include "pkb/problem.h"

namespace pkb::blocks {

constexpr int64_t kVocab = 256;


// The vocabulary (256) is split evenly; batch·seq (and batch·chunk_size) are
// multiples of W by construction (seq and chunk_size are rounded up to one).
inline std::string vocab_check_world(int world) {
  if (world < 1 || kVocab % world != 0) return "the world size must divide the 256-word vocabulary";
  return "";
}

// The published _apply_top_k_top_p, op for op (bf16 sort, softmax and cumsum
// outputs; the threshold by slicing; values below it masked; ties with the
// top-k threshold are kept). 82 publishes the threshold as a gather and the
// mask as a `where` on `ge`: the same values to the bit (a select is exact),
// which the fingerprints show. With `keep` (84's backward), also the keep
// mask (undefined when nothing is filtered).
inline at::Tensor apply_top_k_top_p(const at::Tensor& logits, int64_t top_k, double top_p, at::Tensor* keep = nullptr) {
  const bool need_k = top_k > 0, need_p = top_p < 1.0;
  if (!need_k && !need_p) return logits;
  const auto shape = logits.sizes().vec();
  const int64_t vocab = logits.size(-1);
  at::Tensor l2 = logits.reshape({-1, vocab});
  if (need_k) top_k = std::min(top_k, vocab);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (need_k && !need_p) {
    at::Tensor values = std::get<0>(at::topk(l2, top_k, -1));
    at::Tensor threshold = values.narrow(-1, top_k - 1, 1).expand_as(l2);
    if (!keep) return l2.masked_fill(l2.lt(threshold), neg_inf).reshape(shape);
    at::Tensor kept = l2.ge(threshold);
    *keep = kept.reshape(shape);
    return l2.masked_fill(kept.logical_not(), neg_inf).reshape(shape);
  }
  auto [sorted, idx] = l2.sort(-1, /*descending=*/false);
  at::Tensor top_k_mask;
  if (need_k) {
    const int64_t k_index = sorted.size(-1) - top_k;
    at::Tensor threshold = sorted.slice(-1, k_index, k_index + 1);
    if (!keep) {
      sorted = sorted.masked_fill(sorted.lt(threshold), neg_inf);
    } else {
      top_k_mask = sorted.ge(threshold);
      sorted = sorted.masked_fill(top_k_mask.logical_not(), neg_inf);
    }
  }
  at::Tensor probs = sorted.softmax(-1);
  at::Tensor top_p_mask = at::cumsum(probs, -1).gt(1.0 - top_p);
  top_p_mask.select(-1, top_p_mask.size(-1) - 1).fill_(true);  // always keep the largest
  sorted = sorted.masked_fill(top_p_mask.logical_not(), neg_inf);
  at::Tensor filtered = sorted.scatter(-1, idx, sorted);
  if (keep) {
    at::Tensor keep_sorted = top_k_mask.defined() ? top_p_mask.logical_and(top_k_mask) : top_p_mask;
    *keep = keep_sorted.scatter(-1, idx, keep_sorted).reshape(shape);
  }
  return filtered.reshape(shape);
}

// (num_tokens, Vl) vocab-sharded -> (num_tokens / W, W·Vl) token-sharded.
inline at::Tensor all_to_all_vp_to_seq(Collectives& comm, const at::Tensor& logits) {
  const int64_t world = comm.world_size();
  const int64_t tokens = logits.size(0), local_vocab = logits.size(1), local_tokens = tokens / world;
  at::Tensor in = logits.contiguous().flatten();
  at::Tensor out = at::empty_like(in);
  comm.all_to_all_single(out, in);
  return out.view({world, local_tokens, local_vocab}).permute({1, 0, 2}).reshape({local_tokens, world * local_vocab});
}

// The published draw's logits and targets: batch = max(1, min(M/512, 4)),
// seq = roundup(max(W, min(M/128, 32)), W); logits (batch, seq, 256/W) randn
// in the run's dtype, + 8 (rounded) at the target's column when this rank
// holds it; target = (mult·i + offset + trial) mod 256.
inline void add_vocab_logits_and_target(Inputs& in, const InputRequest& req, int64_t mult, int64_t offset) {
  const int64_t w = req.world;
  const int64_t batch = std::max<int64_t>(1, std::min<int64_t>(req.m / 512, 4));
  const int64_t seq = round_up(std::max<int64_t>(w, std::min<int64_t>(req.m / 128, 32)), w);
  const int64_t local_vocab = kVocab / w;
  at::Tensor logits = at::randn({batch, seq, local_vocab}, req.options());
  at::Tensor ids = at::arange(batch * seq, req.options(at::kLong));
  at::Tensor target = at::remainder(ids * mult + offset + req.trial, kVocab).reshape({batch, seq});
  at::Tensor global_vocab = req.rank * local_vocab + at::arange(local_vocab, req.options(at::kLong));
  at::Tensor target_mask = global_vocab.view({1, 1, local_vocab}).eq(target.unsqueeze(-1));
  logits = logits + target_mask.to(logits.scalar_type()) * 8.0;
  in.add("vocab_parallel_logits", logits.contiguous());
  in.add("target", target.contiguous());
}

// chunk_size = min(roundup(max(W, seq/4), W), seq) (83, 84).
inline int64_t vocab_chunk_size(const Inputs& in, int world) {
  const int64_t seq = in.tensor(0).size(1);
  return std::min(round_up(std::max<int64_t>(world, seq / 4), world), seq);
}

// NOTE [integrity trials] (pkb/integrity.h) for 82-84: the published + 8 at
// the target leaves it (nearly) alone after the top-k/top-p filter, so at the
// CPU shape almost every output is 0 and an all-zeros answer passed; the
// targets, a function of the trial index, were also the same for the
// refresh in place. Here, from a seed every rank shares (each rank keeps
// its vocabulary slice, the targets are replicated across the TP group),
// every token's 256 logits are a random permutation of the distinct values
// (i - 128)/8, exact in bf16, and its target is the entry holding the r-th
// largest, r uniform in [0, 8): the target survives top-k among others, so
// its log-probability is about -1 .. -3. Distinct logits, because
// which of two equal logits the top-p cut keeps depends on how the sort
// orders ties (measured: random bf16 logits gave a second, independent
// implementation one element of 256 off at W = 4). Replaces arguments 0
// and 1 of the published draw `in`; later draws continue the same stream.
inline void replace_vocab_logits_for_integrity(Inputs& in, const InputRequest& req) {
  const at::Tensor published = in.tensor(0);
  const int64_t batch = published.size(0), seq = published.size(1), local_vocab = published.size(2);
  const auto cpu = at::TensorOptions();
  at::manual_seed(integrity_shared_seed(req));
  at::Tensor grid = (at::arange(kVocab, cpu.dtype(at::kFloat)) - 128.0) / 8.0;
  at::Tensor order = at::argsort(at::rand({batch, seq, kVocab}, cpu.dtype(at::kFloat)), /*dim=*/-1, /*descending=*/false);
  at::Tensor logits = grid.index_select(0, order.reshape({-1})).view({batch, seq, kVocab});
  at::Tensor rank_from_top = at::randint(0, 8, {batch, seq, 1}, cpu.dtype(at::kLong));
  at::Tensor target = order.eq(kVocab - 1 - rank_from_top).to(at::kInt).argmax(-1);
  logits = logits.narrow(-1, req.rank * local_vocab, local_vocab).to(published.scalar_type());
  in.args()[0].value = logits.contiguous().to(req.device);
  in.args()[1].value = target.contiguous().to(req.device);
}

// The published arguments after the tensors: tp_group None (the world),
// top_k 10, top_p 0.9.
inline void add_filter_args(Inputs& in) {
  in.add("tp_group", None{});
  in.add("top_k", int64_t{10});
  in.add("top_p", 0.9);
}

// 82-84: the vocabulary check and the integrity draw
// (replace_vocab_logits_for_integrity) they share.
class VocabParallelLogProbs : public Problem {
 public:
  std::string check_world(int world) const override { return vocab_check_world(world); }

  Inputs make_integrity_inputs(const InputRequest& req) const override {
    Inputs in = make_inputs(req);
    replace_vocab_logits_for_integrity(in, req);
    return in;
  }
};

// The forward of 82 and 83: for each block of chunk_tokens flattened tokens
// (all of them for 82), one all-to-all (vocab shards -> token shard), the bf16
// filter, the float32 log-softmax at the target and one all-gather; the chunk
// results concatenated in order, (batch, seq) float32.
inline at::Tensor vocab_parallel_log_probs(Collectives& comm, const at::Tensor& vp_logits, const at::Tensor& target,
                                           int64_t top_k, double top_p, int64_t chunk_tokens) {
  const int64_t world = comm.world_size(), rank = comm.rank();
  const int64_t batch = vp_logits.size(0), seq = vp_logits.size(1), local_vocab = vp_logits.size(2);
  const int64_t tokens = batch * seq;
  PKB_CHECK(tokens % world == 0, "B*S=", tokens, " must be divisible by tensor parallel size ", world);
  PKB_CHECK(chunk_tokens % world == 0, "B*chunk_size=", chunk_tokens, " must be divisible by tp size ", world);
  at::Tensor logits_2d = vp_logits.reshape({tokens, local_vocab});
  at::Tensor target_flat = target.reshape({-1});
  std::vector<at::Tensor> pieces;
  for (int64_t start = 0; start < tokens; start += chunk_tokens) {
    const int64_t end = std::min(start + chunk_tokens, tokens), local_tokens = (end - start) / world;
    at::Tensor target_local = target_flat.slice(0, start, end).slice(0, rank * local_tokens, (rank + 1) * local_tokens);
    at::Tensor seq_logits = all_to_all_vp_to_seq(comm, logits_2d.slice(0, start, end));
    at::Tensor filtered = apply_top_k_top_p(seq_logits, top_k, top_p);
    at::Tensor log_probs = at::log_softmax(filtered.to(at::kFloat), -1);
    at::Tensor local_lp = log_probs.gather(-1, target_local.unsqueeze(-1)).squeeze(-1);
    std::vector<at::Tensor> gathered;
    for (int64_t i = 0; i < world; ++i) gathered.push_back(at::empty_like(local_lp));
    comm.all_gather(gathered, local_lp);
    pieces.push_back(at::cat(gathered, 0));
  }
  return at::cat(pieces, 0).reshape({batch, seq});
}

// 82 and 83: N tokens, Vl = 256/W local vocabulary, e = logit bytes; summed
// over the chunks, the all-to-alls send (W-1)/W of the N·Vl logits and the
// all-gathers receive (W-1)·(N/W) float32 values. HBM: the logits read
// (N·Vl·e), the output written (4N). FLOPs per local token row of 256: a sort
// (256·log2 256), softmax, cumsum, log-softmax (~10 per element):
// (N/W)·256·(8 + 10).
inline Cost vocab_parallel_log_probs_cost(int world, const Inputs& in) {
  const at::Tensor& l = in.tensor(0);
  const double n = static_cast<double>(l.size(0) * l.size(1)), vl = static_cast<double>(l.size(2));
  const double e = static_cast<double>(l.element_size()), w = world;
  return {/*nvlink_bytes_per_rank=*/(w - 1) / w * n * vl * e + (w - 1) * (n / w) * 4.0,
          /*hbm_bytes_per_rank=*/n * vl * e + 4.0 * n,
          /*flops_per_rank=*/(n / w) * kVocab * 18.0};
}

}  // namespace pkb::blocks
