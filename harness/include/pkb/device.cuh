// Device helpers every symmetric-memory candidate needs: cross-GPU signals and
// a block-level barrier over the signal pads of a pkb::SymmetricBuffer, the
// 16-byte copy and bf16 sum loops the collectives are made of, the view of a
// symmetric buffer that a kernel takes by value, and the host side that builds
// it and sizes a one-wave grid.
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
//
// NOTE [double buffering]
// A kernel that stages its data in its own symmetric buffer, barriers, then
// reads the peers' buffers must not overwrite a buffer a peer may still be
// reading from the previous call. double_buffered() hands each call the other
// half of a buffer of twice the payload, so a rank may start its next call
// while a peer still reads this one's half; the next barrier on that half is
// two calls away, and passing it means every peer has finished the call that
// read it. So one cross-GPU barrier per call suffices: one kernel launch, no
// host synchronisation. The half alternates with every call made from one
// source file; every rank makes the same calls, so the halves agree across
// ranks.
#pragma once

#include <cuda/atomic>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "pkb/context.h"

namespace pkb {
namespace device {

// Slots [0, kSlotBase) of each pad are left to SymmetricBuffer::barrier().
inline constexpr int kSlotBase = 16;

// Threads per block of the shipped solutions (one 16-byte unit per thread per step).
inline constexpr int kThreads = 512;

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

// copy16 of share `s` of each of `slices` consecutive slices of `n16` units
// (slice p starts at unit p * n16 of both src and dst).
__device__ __forceinline__ void copy16_slices(uint4* dst, const uint4* src, int slices, int64_t n16, Share s) {
  for (int p = 0; p < slices; ++p) copy16(dst + p * n16, src + p * n16, s);
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

// What a kernel needs of a pkb::SymmetricBuffer, passed to it by value: the
// region this call uses, `offset` bytes into every rank's buffer (the same
// offset on every rank), and the pads and ranks for block_barrier(). Built on
// the host by view_of() or double_buffered().
struct SymmetricView {
  uint4* own;              // this rank's region: ptr() + offset
  void* const* peers;      // peer_ptrs_device(): every rank's buffer (not region)
  size_t offset;           // bytes from a buffer's start to the region
  uint32_t* const* pads;   // signal_pads_device()
  int rank, world;

  // Rank k's region (k == rank: own).
  __device__ __forceinline__ const uint4* peer(int k) const { return at_offset(peers, k, offset); }
  // block_barrier() over this buffer's pads; every thread of the block calls it.
  __device__ __forceinline__ void barrier(int slot = blockIdx.x) const { block_barrier(pads, rank, world, slot); }
};

// Host side.

// The stream the harness times, as a cudaStream_t (launch and order work on it).
inline cudaStream_t stream_of(const Context& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

// Blocks for a grid that is one wave on the current device (every block
// resident at once, as block_barrier() needs), at most `want`.
inline int one_wave_blocks(int64_t want) {
  static int sms = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n > 0 ? n : 1;
  }();
  return static_cast<int>(want < 1 ? 1 : (want < sms ? want : sms));
}

// Blocks of kThreads threads for `units` units, one unit per thread, but at
// most one wave (blocks then loop over their block_share()).
inline int blocks_for(int64_t units) { return one_wave_blocks((units + kThreads - 1) / kThreads); }

// The region `offset` bytes into `buf`, as a kernel sees it on this rank.
inline SymmetricView view_of(const Context& ctx, SymmetricBuffer& buf, size_t offset) {
  return {reinterpret_cast<uint4*>(static_cast<char*>(buf.ptr()) + offset), buf.peer_ptrs_device(), offset,
          reinterpret_cast<uint32_t* const*>(buf.signal_pads_device()), ctx.rank(), ctx.world_size()};
}

// The half of the symmetric buffer `name` (2 * half_bytes, created on first use:
// every rank must call it) that this call uses. See NOTE [double buffering].
// `static`: the call count belongs to the including source file.
static inline SymmetricView double_buffered(Context& ctx, const std::string& name, size_t half_bytes) {
  static int64_t calls = 0;
  SymmetricBuffer& buf = ctx.symmetric(name, 2 * half_bytes);
  return view_of(ctx, buf, static_cast<size_t>(calls++ % 2) * half_bytes);
}

}  // namespace device
}  // namespace pkb
