// The problem plugin ABI: problems/NN_slug/problem.cpp defines a pkb::Problem
// and exports it with PKB_PROBLEM(Class), which expands to one versioned
// extern "C" entry symbol. Loading a plugin runs no code of it; the harness
// calls the entry when it needs the problem.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "pkb/collectives.h"
#include "pkb/context.h"
#include "pkb/inputs.h"

namespace pkb {

inline constexpr int kProblemAbiVersion = 1;

struct Tolerance {
  double atol = 1e-2;
  double rtol = 1e-2;
};

// An aggregate, so a problem can spell it in one initializer:
//   static const ProblemSpec s{1, "allreduce", "Sum all-reduce", "Collective Primitive", "torch.distributed", "any"};
struct ProblemSpec {
  int id = 0;
  std::string slug;      // "allreduce"
  std::string title;
  std::string category;  // one of the 12 categories of the catalog
  std::string origin;    // the codebase the problem comes from
  std::string world_rule;  // human-readable, e.g. "any", "W divides 512"
  Tolerance tolerance;
  bool runs_on_cpu = true;
  std::string cpu_skip_reason;  // why not, when runs_on_cpu is false
};

struct InputRequest {
  int rank = 0;
  int world = 1;
  int trial = 0;
  int64_t m = 1024;  // the base shape (M, N)
  int64_t n = 1024;
  at::ScalarType dtype = at::kBFloat16;
  at::Device device = at::kCPU;
  // seed(pid, rank, trial) = 42 + 1000*pid + rank + 1000003*trial; the harness
  // has already called at::manual_seed(seed) when make_inputs runs.
  uint64_t seed = 0;

  // A tensor drawn as requested: its dtype, on its device.
  at::TensorOptions options() const { return at::TensorOptions().dtype(dtype).device(device); }
  // On the requested device in a dtype of the problem's own (indices, fp32 state, ...).
  at::TensorOptions options(at::ScalarType own) const { return at::TensorOptions().dtype(own).device(device); }
};

inline uint64_t seed_for(int problem_id, int rank, int trial) {
  return 42ull + 1000ull * problem_id + rank + 1000003ull * trial;
}

// Integrity trials' seeds: never one of the published trials' (those use
// trials 0..999 at most); `trial` is the integrity trial's own index.
inline uint64_t integrity_seed_for(int problem_id, int rank, int trial) {
  return seed_for(problem_id, rank, 7919 + trial) ^ 0x5eedf00dull;
}

// Per rank, for the roofline: T_roof = max(flops/peak, hbm/hbm_bw, nvlink/nvlink_bw).
struct Cost {
  double nvlink_bytes_per_rank = 0;  // bytes this rank must send (or receive, the larger) over NVLink
  double hbm_bytes_per_rank = 0;
  double flops_per_rank = 0;
};

class Problem {
 public:
  virtual ~Problem() = default;
  virtual const ProblemSpec& spec() const = 0;
  // Empty when `world` is allowed; otherwise the reason it is not.
  virtual std::string check_world(int world) const {
    return world >= 1 ? "" : "world size must be at least 1";
  }
  // Deterministic for a given request (see InputRequest::seed).
  virtual Inputs make_inputs(const InputRequest& req) const = 0;
  virtual Outputs reference(Context& ctx, Collectives& comm, const Inputs& in) const = 0;
  // Per rank, from this rank's inputs (the driver takes the largest over ranks).
  virtual Cost cost(int world, const Inputs& in) const = 0;
  // Whether the values of output `index` on `rank` are part of the contract.
  // Shape and dtype are always checked. A problem that returns false must say
  // why in its README (e.g. a buffer NCCL uses as scratch on non-root ranks).
  virtual bool values_checked(int rank, int world, size_t index) const { return true; }

  // Inputs of an integrity trial (NOTE [integrity trials] in pkb/integrity.h):
  // req.trial is the trial's index (after the published ones) and req.seed
  // integrity_seed_for(...), already passed to at::manual_seed. The default
  // draws make_inputs(req) with that seed: every input the problem draws at
  // random is drawn anew, within the problem's own preconditions. A problem
  // whose published inputs ignore the seed (constants such as rank + 1)
  // overrides this with inputs that vary by element, rank and trial, so that
  // no answer computed from rank and world alone passes.
  virtual Inputs make_integrity_inputs(const InputRequest& req) const { return make_inputs(req); }
};

// The spec() most problems write: a constant declared at the top of
// problem.cpp, named in the class head, over pkb::Problem or over a shared
// building block (a Base derived from it) whose constructors it inherits.
//   const pkb::ProblemSpec kSpec{1, "allreduce", ...};
//   class AllReduce : public pkb::ProblemWithSpec<kSpec> { ... };
template <const ProblemSpec& Spec, class Base = Problem>
class ProblemWithSpec : public Base {
 public:
  using Base::Base;
  const ProblemSpec& spec() const final { return Spec; }
};

struct ProblemEntry {
  int abi_version;
  Problem* (*create)();
};

}  // namespace pkb

#define PKB_PROBLEM_ENTRY_SYMBOL "pkb_problem_entry_v1"

#define PKB_PROBLEM(Class)                                                                 \
  extern "C" __attribute__((visibility("default"))) const ::pkb::ProblemEntry*             \
  pkb_problem_entry_v1() {                                                                 \
    static const ::pkb::ProblemEntry entry{::pkb::kProblemAbiVersion,                      \
                                           []() -> ::pkb::Problem* { return new Class(); }}; \
    return &entry;                                                                         \
  }
