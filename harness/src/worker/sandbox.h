// The worker's half of NOTE [untrusted candidates] (driver/containment.h):
// dropping root before the candidate is loaded.
#pragma once

#include <string>

namespace pkb {

// setgroups/setgid/setuid to (uid, gid), keeping the process dumpable (ranks
// of one evaluation share memory and file descriptors) and dying with the
// driver (the parent-death signal is cleared by a change of credentials).
// Returns an empty string on success, else why not.
std::string drop_privileges(int uid, int gid);

// Before dropping on GPU: libraries torch and CUDA load on first use (cuDNN's
// sub-libraries, cuFFT, cuSOLVER, cuSPARSE, cuRAND, NVRTC, nvJitLink,
// torch_cuda_linalg) are loaded now, from the folders of those already
// loaded, since the unprivileged user may not be able to read them later
// (the venv under /root). Returns how many were loaded.
int preload_lazy_libraries();

}  // namespace pkb
