// The run-time half of NOTE [forbidden routes] (driver/candidate_build.h):
// while a candidate runs, c10d's process-group registry holds no group, so
// nothing the candidate calls (_c10d_functional ops, resolve_process_group)
// resolves the world group by name. The harness's own symmetric-memory
// rendezvous, which resolves the group by name, runs with it registered again
// (GroupExposed). No-op without CUDA (CPU mode registers no group).
#pragma once

#include <string>

namespace pkb {

class CandidateRoutes {
 public:
  // Scope of one candidate call: the group is unregistered.
  struct Hidden {
    Hidden();
    ~Hidden();
  };
  // Scope inside a candidate call where the harness needs the group.
  struct Exposed {
    Exposed();
    ~Exposed();
  };
  // The name the world group is registered under (set by Distributed's user).
  static void set_group(const std::string& name);
};

}  // namespace pkb
