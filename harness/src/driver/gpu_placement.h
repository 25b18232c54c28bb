// Which GPU each rank runs on (DESIGN.md §11).
//
// NOTE [ranks sharing a GPU]
// With at least as many visible GPUs as ranks, rank r runs on GPU r, NCCL
// carries the reference's collectives and PyTorch's symmetric memory the
// candidates' peer buffers: the measured path, unchanged. With fewer GPUs
// than ranks (or --ranks-per-gpu K > 1), ranks are placed round-robin on the
// first ceil(W/K) GPUs and several ranks share one device. NCCL refuses that
// (ncclInvalidUsage) and so does PyTorch's symmetric memory ("allocations from
// overlapping devices"), so such a run uses Gloo over the CUDA tensors
// (staging through host memory only what Gloo refuses; worker/
// collectives_c10d.cpp) and pkb's own CUDA IPC buffers behind the same
// SymmetricBuffer API (worker/symmetric_ipc.cpp). Kernels of ranks that
// share a GPU run in turns (time-slicing), so a spin-wait for a peer makes
// progress only when the peer's context gets its slice: it does, slowly.
// Such runs check GPU numerics and candidate correctness, never speed:
// records carry `shared_gpu: true`, the summary marks their speedups and
// `pkb score` keeps them out of speed metrics unless asked.
#pragma once

#include <string>
#include <vector>

#include "common/results.h"

namespace pkb {

struct GpuPlacement {
  std::vector<int> gpu_of_rank;  // device index of each rank
  int gpus_used = 0;
  bool shared = false;  // some GPU hosts more than one rank
  std::string warning;  // set when sharing was chosen automatically
};

// `ranks_per_gpu` 0: automatic (one rank per GPU when there are enough,
// otherwise ceil(world / visible) per GPU, with a warning); K >= 1: exactly
// ceil(world / K) GPUs, an error when fewer are visible.
GpuPlacement place_ranks(int world, int visible_gpus, int ranks_per_gpu);

// A command's placement for `device`: on cuda, place_ranks() over the visible
// GPUs with its warning printed to stderr; on cpu, none (and --ranks-per-gpu
// must be 0).
GpuPlacement placement_for(const std::string& device, int world, int ranks_per_gpu);

// The worker's half: job["gpu_of_rank"] and job["shared_gpu"] (a CPU job gets neither).
void add_placement(Json& job, const GpuPlacement& p);

// GPUs this process may use: /dev/nvidiaN device nodes, narrowed by
// CUDA_VISIBLE_DEVICES when it is set. The driver never touches a GPU.
int visible_gpus();

}  // namespace pkb
