// NOTE [recording device]
// Golden replay only. A fixture holds what the published code returned on the
// device it was recorded on: "cuda" (../shared/golden) or "cpu" (the Gloo
// recordings ../shared/golden-w4 and -w8). Where that result depends on the
// device beyond rounding (a sort or top-k whose order among equal keys is the
// device kernel's, not the problem's contract), the problem also derives from
// PublishedOn and, for `recorded_on`, changes only that op to the recording
// device's. reference() alone is the contract and decides every verdict;
// `pkb golden --recorded-on` selects this, nothing else calls it.
#pragma once

#include <string>

#include "pkb/problem.h"

namespace pkb {

class PublishedOn {
 public:
  virtual ~PublishedOn() = default;
  virtual Outputs published_on(const std::string& recorded_on, Context& ctx, Collectives& comm,
                               const Inputs& in) const = 0;
};

}  // namespace pkb
