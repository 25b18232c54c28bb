// The kernels `pkb calibrate` times (worker/calibrate.cpp), behind a plain C++
// interface so that the orchestration compiles without nvcc. Every launch is
// checked (PKB_CUDA_CHECK on cudaGetLastError).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace pkb {
namespace calib {

inline constexpr int kCopyThreads = 512;

// dst[0, bytes) = src[0, bytes) by SM loads and stores, `blocks` blocks of
// kCopyThreads threads, 16 bytes per thread per access (bytes a multiple of
// 16, both pointers 16-byte aligned). Either side may be a peer's memory.
void launch_copy(void* dst, const void* src, size_t bytes, int blocks, cudaStream_t stream);

// An empty kernel, one thread.
void launch_empty(cudaStream_t stream);

// `iters` cross-GPU barriers (pkb::device::block_barrier over a symmetric
// buffer's signal pads, slot 0) in one kernel of one block. Every rank must
// launch it with the same `iters`.
void launch_barrier_loop(void* const* pads_device, int rank, int world, int iters, cudaStream_t stream);

}  // namespace calib
}  // namespace pkb
