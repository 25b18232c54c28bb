// The contestant: the process that loads and runs a candidate, and nothing
// else.
//
// NOTE [referee and contestant]
// Each rank of an evaluation of a candidate plugin is two processes. The
// referee (`pkb worker`, worker/worker.cpp) is trusted: it joins the store
// and the process group, loads the problem plugin, draws the inputs, runs
// and times the reference, compares, and writes the rank's result. The
// contestant (forked by its referee before the referee holds anything of the
// evaluation, NOTE [contestant start] in worker/contestant_client.cpp, so it
// shares no memory with it) loads only the candidate and runs it when asked.
// Between them (worker/contestant_client.h drives the protocol):
//  - one AF_UNIX socket pair (worker/control_channel.h), the contestant's only
//    connection: its environment holds no store address, and its store
//    (worker/proxy_store.h) is a proxy through the referee under the prefix
//    "c/", which no referee reads; symmetric buffers rendezvous through it,
//    so they live among contestants only, and the references' collectives
//    run among referees only;
//  - shared regions (worker/tensor_transfer.h): the referee places the
//    inputs in regions it owns (sealed memfds on CPU, CUDA IPC blocks on
//    GPU) and the contestant maps them; the contestant places its outputs in
//    a region of its own, which the referee copies out while the contestant
//    is stopped. Descriptors from the contestant are bounds-checked.
//  - reach: when pkb runs as root the referee stays root and the contestant
//    drops to the worker user after its set-up (so it cannot signal, trace
//    or read the referee, nor write the evaluation directory: the referee
//    writes rank_<r>.json there), and first enters a network namespace of
//    its own (no route to the store, or any port); see
//    isolate_contestant() for what holds without root.
//  - time: the referee times its contestant's segments by its own clock and
//    stops the contestant's process tree while the reference is timed (NOTE
//    [timing protocol], step 5).
// A contestant that dies, exits, or answers out of protocol ends its rank's
// evaluation as runtime_error; one that kills or stops its referee leaves a
// rank without a result (runtime_error) or hung (timeout): never correct.
// The reference as the candidate, and `pkb audit`'s trivial candidates, are
// the harness's own code and run in the referee (runs_in_contestant()).
#pragma once

#include <string>

namespace pkb {

// Whether a job's candidate runs in a contestant: the driver then gives it a
// folder of its own, and each referee starts one.
inline bool runs_in_contestant(const std::string& mode, const std::string& candidate) {
  return mode == "eval" && candidate != "reference" && candidate.rfind("audit:", 0) != 0;
}

// Serves its referee on the control channel `fd`, then exits the process:
// called in the forked child, or by `pkb contestant --fd N` where the referee
// had to exec (NOTE [contestant start]).
int contestant_main(int fd);

}  // namespace pkb
