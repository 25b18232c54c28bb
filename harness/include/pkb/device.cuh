// Device helpers every symmetric-memory candidate needs: cross-GPU signals and
// a block-level barrier over the signal pads of a pkb::SymmetricBuffer, plus
// the 16-byte copy and bf16 sum loops the collectives are made of.
//
// NOTE [memory ordering]
// A signal is one uint32 word in the *receiver's* signal pad. put_signal
// changes it 0 -> 1 with a system-scope compare-and-swap and release order, so
// every write this thread made (or observed, e.g. its block's writes after a
// __syncthreads()) before the put is visible to a thread that sees the 1.
// wait_signal changes it 1 -> 0 with acquire order, so nothing after the wait
// can be read before the peer's writes. Because the receiver resets the word,
// the same slot can be reused by the next barrier without epochs: a sender
// whose previous signal was not yet consumed spins until it is.
// System scope (not GPU scope) is required: the peer is another GPU, and the
// writes travel over NVLink.
//
// block_barrier() synchronises block b of this rank with block b of every
// peer. It orders this block's earlier writes before the peers' later reads
// (release), and the peers' earlier writes before this block's later reads
// (acquire). It needs every block of the grid resident on every GPU at once
// (launch at most one wave) and the same grid on every rank.
#pragma once

#include <cuda/atomic>
#include <cuda_bf16.h>

#include <cstdint>

namespace pkb {
namespace device {

// Slots [0, kSlotBase) of each pad are left to SymmetricBuffer::barrier().
inline constexpr int kSlotBase = 16;

__device__ __forceinline__ void put_signal(uint32_t* addr) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> a(*addr);
  uint32_t expected = 0;
  while (!a.compare_exchange_strong(expected, 1u, cuda::memory_order_release, cuda::memory_order_relaxed))
    expected = 0;
}

__device__ __forceinline__ void wait_signal(uint32_t* addr) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> a(*addr);
  uint32_t expected = 1;
  while (!a.compare_exchange_strong(expected, 0u, cuda::memory_order_acquire, cuda::memory_order_relaxed))
    expected = 1;
}

// Every thread of the block calls it. `pads` is SymmetricBuffer::signal_pads_device();
// `slot` picks a row of world words in each pad (use blockIdx.x, or blockIdx.x +
// gridDim.x for a second barrier in the same kernel). See NOTE [memory ordering].
__device__ __forceinline__ void block_barrier(uint32_t* const* pads, int rank, int world, int slot) {
  __syncthreads();
  if (threadIdx.x < world) {
    const int peer = threadIdx.x;
    const int row = (kSlotBase + slot) * world;
    put_signal(pads[peer] + row + rank);
    wait_signal(pads[rank] + row + peer);
  }
  __syncthreads();
}

// The [begin, end) share of `n` units that block `b` of `blocks` owns; the same
// on every rank for the same grid, so matching blocks touch matching data.
struct Share {
  int64_t begin, end;
};
__device__ __forceinline__ Share block_share(int64_t n, int b = blockIdx.x, int blocks = gridDim.x) {
  int64_t per = (n + blocks - 1) / blocks;
  int64_t begin = per * b < n ? per * b : n;
  int64_t end = begin + per < n ? begin + per : n;
  return {begin, end};
}

// 16-byte units [s.begin, s.end) from src to dst, strided over the block.
__device__ __forceinline__ void copy16(uint4* __restrict__ dst, const uint4* __restrict__ src, Share s) {
  for (int64_t i = s.begin + threadIdx.x; i < s.end; i += blockDim.x) dst[i] = src[i];
}

// `offset` bytes into rank k's symmetric buffer (peers from peer_ptrs_device()).
__device__ __forceinline__ const uint4* at_offset(void* const* peers, int k, size_t offset) {
  return reinterpret_cast<const uint4*>(static_cast<const char*>(peers[k]) + offset);
}

// dst[i] = sum over ranks k of peer k's buffer at `offset`, unit i; 8 bf16 per
// 16-byte unit, summed in fp32 in rank order and rounded once (for two ranks,
// the same bits as NCCL's bf16 sum).
__device__ __forceinline__ void sum16_bf16(uint4* __restrict__ dst, void* const* peers, size_t offset, int world,
                                           Share s) {
  for (int64_t i = s.begin + threadIdx.x; i < s.end; i += blockDim.x) {
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = 0.f;
    for (int k = 0; k < world; ++k) {
      uint4 v = at_offset(peers, k, offset)[i];
      const __nv_bfloat16* b = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += __bfloat162float(b[j]);
    }
    uint4 o;
    __nv_bfloat16* ob = reinterpret_cast<__nv_bfloat16*>(&o);
#pragma unroll
    for (int j = 0; j < 8; ++j) ob[j] = __float2bfloat16(acc[j]);
    dst[i] = o;
  }
}

// Host side: blocks for a grid that is one wave on the current device (every
// block resident at once, as block_barrier() needs), at most `want`.
inline int one_wave_blocks(int64_t want) {
  static int sms = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n > 0 ? n : 1;
  }();
  return static_cast<int>(want < 1 ? 1 : (want < sms ? want : sms));
}

inline constexpr int kThreads = 512;

}  // namespace device
}  // namespace pkb
