// NOTE [fixed inputs]
// A problem with an input far larger than the rest that its reference only
// reads (68: a 56.8 GB embedding table at W = 1, where a full clone per side
// needed ~170 GB of an H200's 141 GB) derives from FixedInputs as well as Problem
// and names those inputs: they stay fixed over the timed calls. The harness
// then holds one copy of each per process, instead of one per clone and
// input group:
//  - the referee's (the drawn tensor) is what the reference reads in every
//    trial, the refresh and the timing, never a clone; a checksum on the
//    device before and after each reference call (and around the timing)
//    holds it to the declaration (harness_error if the reference wrote it);
//  - the contestant's (its trial region) is what every timing group of the
//    candidate reads; it is compared with the referee's, bit for bit, after
//    each trial (the mutation check) and after the timing: a candidate that
//    wrote it is output_mismatch naming the input;
//  - each timed call's new contents (NOTE [fresh inputs], step 1) and the
//    refresh's (NOTE [integrity trials]) come from vary_inputs: new values of
//    every other input, the fixed ones the last trial's.
// What it lets a candidate do: a fixed input's values repeat over the timed
// calls, so what the candidate derives from the fixed inputs alone it may
// reuse between calls; each problem's README says what that is. Everything
// else is new on every call. `--timing published` shares fixed inputs among
// the timing's groups only where one input set already exceeds 3x the cache
// (its step 1 gives one group per side then, and no cache can hold it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pkb/problem.h"

namespace pkb {

// A key of a vary_inputs draw that is the same on every rank (the draw's
// integrity seed with its rank taken out: integrity_seed_for), mixed: for a
// variation every rank must make alike (68's offset into the shards).
inline uint64_t world_draw_key(const InputRequest& req) {
  uint64_t z = (req.seed ^ 0x5eedf00dull) - static_cast<uint64_t>(req.rank);
  z += 0x9e3779b97f4a7c15ull;  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class FixedInputs {
 public:
  virtual ~FixedInputs() = default;
  // Indices (argument positions) of the fixed input tensors.
  virtual std::vector<size_t> fixed_inputs() const = 0;
  // New contents for a timed call or the refresh: `base` (the last trial's
  // inputs) with its fixed tensors themselves (not copies) and every other
  // argument drawn anew within the problem's preconditions, with base's
  // shapes and dtypes. req.seed has been passed to at::manual_seed.
  virtual Inputs vary_inputs(const InputRequest& req, const Inputs& base) const = 0;
};

}  // namespace pkb
