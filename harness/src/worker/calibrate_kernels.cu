// See calibrate_kernels.h.
#include "worker/calibrate_kernels.h"

#include "pkb/check.h"
#include "pkb/device.cuh"

namespace pkb {
namespace calib {

namespace {

constexpr int kUnroll = 4;

// Grid-stride copy with kUnroll independent 16-byte loads in flight per
// thread before their stores (enough to cover NVLink latency).
__global__ void __launch_bounds__(kCopyThreads) copy_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src,
                                                            size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__global__ void empty_kernel() {}

__global__ void barrier_loop_kernel(uint32_t* const* pads, int rank, int world, int iters) {
  for (int i = 0; i < iters; ++i) pkb::device::block_barrier(pads, rank, world, 0);
}

}  // namespace

void launch_copy(void* dst, const void* src, size_t bytes, int blocks, cudaStream_t stream) {
  PKB_CHECK(bytes % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0,
            "copy of ", bytes, " bytes: sizes and pointers must be 16-byte aligned");
  PKB_CHECK(blocks >= 1, "copy: no blocks");
  copy_kernel<<<blocks, kCopyThreads, 0, stream>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src), bytes / 16);
  PKB_CUDA_CHECK(cudaGetLastError());
}

void launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 1, 0, stream>>>();
  PKB_CUDA_CHECK(cudaGetLastError());
}

void launch_barrier_loop(void* const* pads_device, int rank, int world, int iters, cudaStream_t stream) {
  PKB_CHECK(pads_device != nullptr && world >= 1 && rank >= 0 && rank < world, "barrier loop: bad arguments");
  int threads = ((world + 31) / 32) * 32;
  barrier_loop_kernel<<<1, threads, 0, stream>>>(reinterpret_cast<uint32_t* const*>(const_cast<void**>(pads_device)),
                                                 rank, world, iters);
  PKB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace calib
}  // namespace pkb
