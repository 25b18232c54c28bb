// Symmetric buffers behind pkb::Context::symmetric(): POSIX shared memory on
// CPU, PyTorch's symmetric memory (NVLink peer mappings) on GPU, CUDA IPC
// mappings when ranks share a GPU.
#pragma once

#include <memory>
#include <string>

#include "pkb/context.h"
#include "worker/peers.h"

namespace pkb {

// Every rank calls this with the same name and size (collective).
std::unique_ptr<SymmetricBuffer> make_host_symmetric(RankPeers& dist, const std::string& name, size_t bytes);
#ifdef PKB_HAVE_CUDA
std::unique_ptr<SymmetricBuffer> make_cuda_symmetric(RankPeers& dist, const std::string& name, size_t bytes);
// Ranks sharing a GPU: CUDA IPC buffers (NOTE [ranks sharing a GPU]).
std::unique_ptr<SymmetricBuffer> make_ipc_symmetric(RankPeers& dist, const std::string& name, size_t bytes);
#endif

inline constexpr size_t kSignalPadBytes = 4096;

}  // namespace pkb
