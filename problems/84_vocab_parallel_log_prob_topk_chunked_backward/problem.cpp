// Backward of problem 83 (NeMo-RL chunked log-probs, inferred): per chunk of
// batch·chunk_size tokens, an all-to-all to the token shard, the bf16
// top-k/top-p filter with its keep mask (blocks/vocab_parallel.h), the float32 softmax gradient of the
// target log-probability, and a reverse all-to-all that returns each rank's
// vocab shard of the gradient (float32).
#include "../blocks/vocab_parallel.h"
#include "pkb/integrity.h"
#include "pkb/problem.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

namespace {

const pkb::ProblemSpec kSpec{84, "vocab_parallel_log_prob_topk_chunked_backward",
                             "Backward of the chunked top-k/top-p log-prob w.r.t. vocab-parallel logits",
                             "Vocab Parallel", "NeMo-RL GRPO loss, chunked vocab-parallel log-probs (inferred)",
                             "W divides 256, batch·seq and batch·chunk_size"};

using namespace pkb::blocks;

// (Tl, V) token-sharded -> (W·Tl, V/W): vocab block j of every local token to rank j.
at::Tensor all_to_all_seq_to_vp(pkb::Collectives& comm, const at::Tensor& logits) {
  const int64_t world = comm.world_size();
  const int64_t local_tokens = logits.size(0), local_vocab = logits.size(1) / world;
  at::Tensor send = logits.reshape({local_tokens, world, local_vocab}).permute({1, 0, 2}).contiguous().flatten();
  at::Tensor recv = at::empty_like(send);
  comm.all_to_all_single(recv, send);
  return recv.reshape({world * local_tokens, local_vocab});
}

class VocabParallelLogProbTopkChunkedBackward : public pkb::ProblemWithSpec<kSpec, VocabParallelLogProbs> {
 public:
  // add_vocab_logits_and_target with target = (19 i + 5 + trial) mod 256;
  // grad_output = linspace(-1, 1, batch·seq) in bf16;
  // chunk_size = min(roundup(max(W, seq/4), W), seq).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in;
    add_vocab_logits_and_target(in, req, 19, 5);
    const int64_t batch = in.tensor(1).size(0), seq = in.tensor(1).size(1);
    at::Tensor grad_output = at::linspace(-1.0, 1.0, batch * seq, req.options(at::kBFloat16)).reshape({batch, seq});
    in.add("grad_output", grad_output.contiguous());
    add_filter_args(in);
    in.add("chunk_size", vocab_chunk_size(in, req.world));
    return in;
  }

  // replace_vocab_logits_for_integrity (blocks/vocab_parallel.h), then
  // grad_output randn from the same stream.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = VocabParallelLogProbs::make_integrity_inputs(req);
    const int64_t batch = in.tensor(1).size(0), seq = in.tensor(1).size(1);
    at::Tensor grad_output = at::randn({batch, seq}, at::TensorOptions().dtype(at::kFloat));
    in.args()[2].value = grad_output.to(in.tensor(2).scalar_type()).contiguous().to(req.device);
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [vp_logits, target, grad_output] = in.tensors<3>();
    const int64_t top_k = in.integer(4);
    const double top_p = in.real(5);
    const int64_t chunk_size = in.integer(6);
    const int64_t world = comm.world_size(), rank = comm.rank();
    const int64_t batch = vp_logits.size(0), seq = vp_logits.size(1), local_vocab = vp_logits.size(2);
    const int64_t tokens = batch * seq, chunk_tokens = batch * std::max<int64_t>(1, chunk_size);
    PKB_CHECK(tokens % world == 0, "B*S=", tokens, " must be divisible by tensor parallel size ", world);
    PKB_CHECK(chunk_tokens % world == 0, "B*chunk_size=", chunk_tokens, " must be divisible by tp size ", world);
    at::Tensor logits_2d = vp_logits.reshape({tokens, local_vocab});
    at::Tensor target_flat = target.reshape({-1}), grad_flat = grad_output.reshape({-1});
    std::vector<at::Tensor> grad_chunks;
    for (int64_t start = 0; start < tokens; start += chunk_tokens) {
      const int64_t end = std::min(start + chunk_tokens, tokens), local_tokens = (end - start) / world;
      at::Tensor target_local = target_flat.slice(0, start, end).slice(0, rank * local_tokens, (rank + 1) * local_tokens);
      at::Tensor grad_local = grad_flat.slice(0, start, end).slice(0, rank * local_tokens, (rank + 1) * local_tokens);
      at::Tensor seq_logits = all_to_all_vp_to_seq(comm, logits_2d.slice(0, start, end));
      at::Tensor keep;
      at::Tensor filtered = apply_top_k_top_p(seq_logits, top_k, top_p, &keep);
      at::Tensor probs = at::softmax(filtered.to(at::kFloat), -1);
      at::Tensor grad_seq = -probs;
      at::Tensor rows = at::arange(local_tokens, target_local.options());
      // grad_seq[rows, target] += 1.0 (a gather, an add, an index_put).
      grad_seq.index_put_({rows, target_local}, grad_seq.index({rows, target_local}) + 1.0);
      grad_seq.mul_(grad_local.unsqueeze(-1));
      if (keep.defined()) grad_seq.mul_(keep);
      grad_chunks.push_back(all_to_all_seq_to_vp(comm, grad_seq));
    }
    return {at::cat(grad_chunks, 0).reshape({batch, seq, local_vocab})};
  }

  // N tokens, Vl = 256/W local vocabulary, e = logit bytes; summed over the
  // chunks: NVLink (W-1)/W of the N·Vl bf16 logits out and of the N·Vl fp32
  // gradient back. HBM: logits and grad_output read, the fp32 gradient shard
  // written (N·Vl·4). FLOPs per local row of 256: sort, softmax, cumsum and
  // the softmax gradient (~12 per element): (N/W)·256·(8 + 12).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& l = in.tensor(0);
    const double n = static_cast<double>(l.size(0) * l.size(1)), vl = static_cast<double>(l.size(2));
    const double e = static_cast<double>(l.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) / w * n * vl * (e + 4.0),
            /*hbm_bytes_per_rank=*/n * vl * e + 2.0 * n + n * vl * 4.0,
            /*flops_per_rank=*/(n / w) * kVocab * 20.0};
  }
};

}  // namespace

PKB_PROBLEM(VocabParallelLogProbTopkChunkedBackward)
