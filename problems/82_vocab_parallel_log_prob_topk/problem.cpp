// Token log-probabilities under top-k / top-p filtering from vocab-parallel
// logits (the NeMo-RL GRPO log-prob path, inferred): an all-to-all turns the
// vocab-sharded logits of all tokens into full-vocab logits of a token
// shard, the bf16 filter runs on the token shard, then the float32
// log-softmax at the target and an all-gather of the per-token values: the
// blocks of blocks/vocab_parallel.h with one chunk of all tokens.
#include "../blocks/vocab_parallel.h"

namespace {

const pkb::ProblemSpec kSpec{82, "vocab_parallel_log_prob_topk",
                             "Token log-probabilities under top-k/top-p filtering from vocab-parallel logits",
                             "Vocab Parallel", "NeMo-RL GRPO loss, vocab-parallel log-probs (inferred)",
                             "W divides 256 and batch·seq"};

using namespace pkb::blocks;

class VocabParallelLogProbTopk : public pkb::ProblemWithSpec<kSpec, VocabParallelLogProbs> {
 public:
  // add_vocab_logits_and_target with target = (17 i + 3 + trial) mod 256.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in;
    add_vocab_logits_and_target(in, req, 17, 3);
    add_filter_args(in);
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& vp_logits = in.tensor(0);
    const int64_t tokens = vp_logits.size(0) * vp_logits.size(1);
    return {vocab_parallel_log_probs(comm, vp_logits, in.tensor(1), in.integer(3), in.real(4), tokens)};
  }

  pkb::Cost cost(int world, const pkb::Inputs& in) const override { return vocab_parallel_log_probs_cost(world, in); }
};

}  // namespace

PKB_PROBLEM(VocabParallelLogProbTopk)
