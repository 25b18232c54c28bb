// Problems whose inputs are one draw that every rank seeds alike (46,
// 55-57, 59, 60): the published draw under seed_for(id, 0, trial), and its
// integrity counterpart.
#pragma once

#include "pkb/integrity.h"
#include "pkb/problem.h"

namespace pkb::blocks {

class SharedSeedDraw : public Problem {
 public:
  Inputs make_inputs(const InputRequest& req) const override {
    return draw(req, seed_for(seed_id_ != 0 ? seed_id_ : spec().id, 0, req.trial));
  }

  // NOTE [integrity trials] (pkb/integrity.h): the published draw under a
  // seed that every rank shares and every integrity draw changes, the refresh
  // in place included (re-seeding from req.trial, as published, gives the
  // refresh the last trial's values again: a cache keyed on pointers passed).
  Inputs make_integrity_inputs(const InputRequest& req) const override {
    return draw(req, integrity_shared_seed(req));
  }

 protected:
  // `seed_id`: the id the published harness seeds with where it is not the
  // problem's own (55-57 are seeded as 56-58, their published numbers).
  explicit SharedSeedDraw(int seed_id = 0) : seed_id_(seed_id) {}

  // The published draw with `seed` in place of seed_for(id, 0, trial).
  virtual Inputs draw(const InputRequest& req, uint64_t seed) const = 0;

 private:
  int seed_id_;
};

}  // namespace pkb::blocks
