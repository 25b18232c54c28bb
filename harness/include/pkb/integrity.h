// Helpers for Problem::make_integrity_inputs (pkb/problem.h).
//
// NOTE [integrity trials]
// The published trials (0 .. --trials-1) use the published inputs exactly, so
// golden replay and published comparisons hold. After them every evaluation
// runs --integrity-trials more (default 2) whose inputs come from
// Problem::make_integrity_inputs with seeds no published trial uses
// (integrity_seed_for). A problem declares how its inputs may vary by
// overriding it; the default re-draws make_inputs under the new seed, which is
// safe for any problem (the same generator, the same preconditions) and varies
// every input the problem draws at random. Problems whose published inputs are
// constants (1-8: rank + 1) override it with small integers that vary by
// element, rank and trial, keeping sums exact in bf16. Integrity trials are
// checked exactly as published ones; a record that fails one names the trial
// and its kind ("trial 3 (integrity): ..."). The timing runs on the last
// trial's inputs, and afterwards the candidate's own timed input storage is
// refreshed in place with another integrity draw and its next answer checked
// (caches keyed on pointers, call counts or first use fail). --published-only
// restores the published checks alone: no integrity trials, no refresh check,
// no input-mutation check.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <variant>

#include "pkb/inputs.h"
#include "pkb/problem.h"

namespace pkb {

// Integers in [lo, hi] drawn from the (already seeded) default generator of
// `opts`' device (on the GPU the CUDA one: every timed call draws anew, NOTE
// [fresh inputs] in worker/timing_fresh.h, so a draw must be cheap),
// converted to `opts`' dtype: exact in bf16 when |v| <= 256.
inline at::Tensor integrity_small_integers(at::IntArrayRef shape, int64_t lo, int64_t hi,
                                           const at::TensorOptions& opts) {
  return at::randint(lo, hi + 1, shape, at::TensorOptions().dtype(at::kLong).device(opts.device())).to(opts);
}

}  // namespace pkb

namespace pkb {

// `in` with every defined tensor's values replaced by integers in [lo, hi]
// (same shape, dtype and device): for problems whose published inputs are
// constants and whose every tensor input may hold any such value.
inline Inputs integrity_replace_tensors(Inputs in, int64_t lo, int64_t hi) {
  for (auto& a : in.args())
    if (auto t = std::get_if<at::Tensor>(&a.value))
      if (t->defined()) a.value = integrity_small_integers(t->sizes(), lo, hi, t->options());
  return in;
}

}  // namespace pkb

namespace pkb {

// The seed rank 0 got for the same integrity draw as `req` (req.seed with its
// rank term taken out), for make_integrity_inputs of problems whose published
// draws seed every rank alike (seed_for(id, 0, trial)) so that inputs
// replicated across ranks agree. Such a draw must not key on req.trial: the
// refresh in place keeps the last trial's index (NOTE [integrity trials]), so
// only the seed tells its draw from that trial's.
inline uint64_t integrity_shared_seed(const InputRequest& req) {
  // integrity_seed_for(p, r, k) = seed_for(p, r, 7919 + k) ^ mask, and
  // seed_for's rank term is + r.
  const uint64_t mask = integrity_seed_for(0, 0, 0) ^ seed_for(0, 0, 7919);
  return ((req.seed ^ mask) - static_cast<uint64_t>(req.rank)) ^ mask;
}

}  // namespace pkb
