// Token log-probabilities under top-k / top-p filtering from vocab-parallel
// logits (the NeMo-RL GRPO log-prob path, inferred): an all-to-all turns the
// vocab-sharded logits of all tokens into full-vocab logits of a token
// shard, the bf16 filter runs on the token shard, then the float32
// log-softmax at the target and an all-gather of the per-token values: the
// blocks of blocks/vocab_parallel.h with one chunk of all tokens.
#include "../blocks/vocab_parallel.h"

namespace {

using namespace pkb::blocks;

class VocabParallelLogProbTopk : public pkb::Problem {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{82, "vocab_parallel_log_prob_topk",
                                    "Token log-probabilities under top-k/top-p filtering from vocab-parallel logits",
                                    "Vocab Parallel", "NeMo-RL GRPO loss, vocab-parallel log-probs (inferred)",
                                    "W divides 256 and batch·seq"};
    return s;
  }

  std::string check_world(int world) const override { return vocab_check_world(world); }

  // add_vocab_logits_and_target with target = (17 i + 3 + trial) mod 256.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in;
    add_vocab_logits_and_target(in, req, 17, 3);
    in.add("tp_group", pkb::None{});
    in.add("top_k", int64_t{10});
    in.add("top_p", 0.9);
    return in;
  }

  // replace_vocab_logits_for_integrity (blocks/vocab_parallel.h).
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = make_inputs(req);
    replace_vocab_logits_for_integrity(in, req);
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
