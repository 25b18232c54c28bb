// Problem 82 processed in token chunks (NeMo-RL chunked log-probs,
// inferred): for each block of batch·chunk_size flattened tokens, one
// all-to-all (vocab shards -> token shard), the bf16 top-k/top-p filter, the
// float32 log-softmax at the target and one all-gather; the chunk results
// are concatenated in order (blocks/vocab_parallel.h).
#include "../blocks/vocab_parallel.h"

namespace {

const pkb::ProblemSpec kSpec{83, "vocab_parallel_log_prob_topk_chunked",
                             "Chunked token log-probabilities under top-k/top-p filtering from vocab-parallel logits",
                             "Vocab Parallel", "NeMo-RL GRPO loss, chunked vocab-parallel log-probs (inferred)",
                             "W divides 256, batch·seq and batch·chunk_size"};

using namespace pkb::blocks;

class VocabParallelLogProbTopkChunked : public pkb::ProblemWithSpec<kSpec, VocabParallelLogProbs> {
 public:
  // add_vocab_logits_and_target with target = (19 i + 5 + trial) mod 256;
  // chunk_size = min(roundup(max(W, seq/4), W), seq).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in;
    add_vocab_logits_and_target(in, req, 19, 5);
    add_filter_args(in);
    in.add("chunk_size", vocab_chunk_size(in, req.world));
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& vp_logits = in.tensor(0);
    const int64_t chunk_tokens = vp_logits.size(0) * std::max<int64_t>(1, in.integer(5));
    return {vocab_parallel_log_probs(comm, vp_logits, in.tensor(1), in.integer(3), in.real(4), chunk_tokens)};
  }

  pkb::Cost cost(int world, const pkb::Inputs& in) const override { return vocab_parallel_log_probs_cost(world, in); }
};

}  // namespace

PKB_PROBLEM(VocabParallelLogProbTopkChunked)
