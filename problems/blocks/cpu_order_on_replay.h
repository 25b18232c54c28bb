// NOTE [recording device] (pkb/published_on.h) for the problems whose only
// device-dependent op is the order a sort or top-k gives equal keys (31, 32,
// 69, 79): the reference keeps the device's order; the replay of a fixture
// recorded on CPU takes the CPU's.
#pragma once

#include <string>

#include "pkb/problem.h"
#include "pkb/published_on.h"

namespace pkb::blocks {

class CpuOrderOnReplay : public Problem, public PublishedOn {
 public:
  Outputs reference(Context& ctx, Collectives& comm, const Inputs& in) const override {
    return forward(comm, in, /*cpu_order=*/false);
  }

  Outputs published_on(const std::string& recorded_on, Context& ctx, Collectives& comm,
                       const Inputs& in) const override {
    return forward(comm, in, /*cpu_order=*/recorded_on == "cpu");
  }

 protected:
  // The reference, equal keys in the CPU's order when `cpu_order`.
  virtual Outputs forward(Collectives& comm, const Inputs& in, bool cpu_order) const = 0;
};

}  // namespace pkb::blocks
