// The trivial candidates of `pkb audit` (issue 11 item 7), built into the
// worker: job candidate "audit:<kind>". Each needs the output shapes, which it
// takes from the reference on the same inputs (so it runs the reference's
// collectives, never its answer, except where the kind says so).
//   zeros, ones     zeros / ones of every output's shape and dtype
//   inputs          each output is an input tensor of its shape and dtype when
//                   there is one (the inputs returned), else zeros
//   rank_only       the reference's answer on this rank's published trial-0
//                   inputs (a function of rank and world alone), every call
//   cached          the first call's right answer, returned ever after
//   pointer_cache   right answers cached by the first input's address
// Every built problem must fail all of them (NOTE [integrity trials]).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pkb/collectives.h"
#include "pkb/context.h"
#include "pkb/problem.h"

namespace pkb {

using TrivialFn = std::function<Outputs(const Inputs&)>;

const std::vector<std::string>& audit_kinds();
// Throws pkb::Error for an unknown kind.
TrivialFn make_trivial_candidate(const std::string& kind, const Problem& problem, Context& ctx, Collectives& comm,
                                 const InputRequest& trial0);

}  // namespace pkb
