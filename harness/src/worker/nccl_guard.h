// NOTE [NCCL calls counted]
// The pkb executable defines NCCL's communication and communicator-creation
// entry points (ncclAllReduce ... ncclRecv, ncclGroupStart/End,
// ncclGetUniqueId, ncclCommInitRank*, ncclCommSplit, ncclCommShrink) and
// exports them (harness/CMakeLists.txt: --export-dynamic-symbol=nccl*). The
// dynamic linker searches the executable first, so every call bound by name,
// libtorch_cuda's c10d included, lands here; each one is counted and forwarded
// to NCCL's profiling entry point (pncclXxx, the interposition hook NCCL
// provides, as MPI's PMPI). While a candidate runs (the window that
// CandidateRoutes::Hidden opens and Exposed closes, worker/route_guard.h) any
// such call is recorded, and the candidate's call ends as forbidden_api
// naming the function.
// Caught: NCCL reached through c10d by any route (a process group the
// candidate found or built, the operator dispatcher, a c10d function found by
// parsing libtorch's symbol tables), and any NCCL function bound by name.
// Not caught: a candidate that finds libnccl's functions by address (parsing
// its memory map and libnccl's ELF tables) and calls them directly, past the
// loader, with a communicator of its own; Gloo (CPU mode) is not counted.
// The reference and the harness (outside the window, or inside Exposed)
// call NCCL freely.
#pragma once

#include <cstdint>

namespace pkb::nccl_guard {

// Opens or closes the window in which an NCCL call is a violation.
void set_window(bool open);
// The first NCCL function called inside the window since the last call, or
// nullptr; clears it.
const char* take_violation();
// Every interposed NCCL call so far, inside the window or not.
uint64_t calls();
// Whether this build interposes NCCL (the GPU path).
bool active();

}  // namespace pkb::nccl_guard
