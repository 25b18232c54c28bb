// The inputs of the collective primitives (01-08, 21): per-rank constants as
// published, and the integrity draws that replace them.
#pragma once

#include "pkb/integrity.h"
#include "pkb/problem.h"

namespace pkb::blocks {

// A (rows, N) tensor of this rank's constant r + 1, under `name`.
inline Inputs rank_constant_inputs(const InputRequest& req, int64_t rows, const char* name = "tensor") {
  return {{name, at::full({rows, req.n}, req.rank + 1, req.options())}};
}

// NOTE [constant collective inputs]
// Integrity trials (NOTE [integrity trials], pkb/integrity.h): the published
// inputs of the collective primitives are constants per rank, which an answer
// from rank and world alone reproduces. Their integrity draws replace every
// tensor with integers, different on every rank and trial: in [-100, 100]
// where the data is only moved (exact in bf16), in [-4, 4] where it is summed
// (every bf16 partial sum stays exact for W <= 64: |sum| <= 256).
inline Inputs integers_for_moved_data(Inputs in) { return integrity_replace_tensors(std::move(in), -100, 100); }
inline Inputs integers_for_sums(Inputs in) { return integrity_replace_tensors(std::move(in), -4, 4); }

// A collective primitive whose published input is this rank's constant
// (01-04, 06, 07): (M, N), or (W·M, N) with `world_rows`.
class RankConstantCollective : public Problem {
 public:
  Inputs make_inputs(const InputRequest& req) const override {
    return rank_constant_inputs(req, world_rows_ ? req.world * req.m : req.m);
  }

  // NOTE [constant collective inputs].
  Inputs make_integrity_inputs(const InputRequest& req) const override {
    return data_ == kSummed ? integers_for_sums(make_inputs(req)) : integers_for_moved_data(make_inputs(req));
  }

 protected:
  enum Data { kMoved, kSummed };
  explicit RankConstantCollective(Data data, bool world_rows = false) : data_(data), world_rows_(world_rows) {}

 private:
  Data data_;
  bool world_rows_;
};

}  // namespace pkb::blocks
