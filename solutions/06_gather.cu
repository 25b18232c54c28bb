// 06 gather: rank 0 ends with every rank's (M, N) share stacked into its
// (W, M, N) output; the other ranks return their input tensor itself, as the
// reference does. Two paths, by the size of one rank's share:
//
//  - small (below kCopyEngineMinBytes): one kernel. Every rank stages its
//    share in its symmetric buffer; after the barrier rank 0's SMs pull that
//    share from every rank. The buffer is double-buffered (NOTE [double
//    buffering] in pkb/device.cuh): one cross-GPU barrier per call, one kernel
//    launch, no host synchronisation. Lowest fixed cost.
//  - large: NOTE [large messages by copy engine] below. Rank 0's copy engines
//    pull the shares over NVLink in chunks while the senders' SMs are still
//    staging the later chunks, and rank 0's SMs copy its own share locally at
//    the same time.
//
// NOTE [large messages by copy engine]
// Why: on 2xH200 at 4096x8192 bf16 (64 MiB a share) the one-kernel path ran
// at 0.86x of NCCL (issue 17). Our reading (not profiled): it does everything
// in sequence on the same SMs: stage the share (a local 64 MiB copy), barrier,
// then on rank 0 copy its own share and pull the peer's over NVLink with one
// 16-byte load per thread per step (about 1 MiB in flight over a one-wave
// grid, little for NVLink's microsecond latency). For large messages:
//  - the NVLink transfer goes to the copy engine (cudaMemcpyAsync from the
//    peer's peer-mapped symmetric buffer): DMA that keeps many requests
//    outstanding by itself, expected near the link's rate (pkb calibrate
//    measures it: nvlink_copy_engine_bw_per_dir), and no SM time;
//  - the staging copy, which the rules make unavoidable (only symmetric
//    buffers are peer-mapped, and the output must be a tensor of its own), is
//    done by the senders' SMs in chunks, and rank 0 pulls chunk k as soon as
//    it is staged, while chunk k + 1 is being staged: only the first chunk's
//    staging is exposed, and it is small (kFirstChunkBytes; chunks double from
//    there up to kMaxChunkBytes, at most kMaxChunks);
//  - rank 0's own share goes straight from its input to its output (its SMs,
//    on the candidate's stream), in parallel with the pulls.
// The price is a fixed cost per call: a barrier kernel, two kernels per
// chunk on each sender, one wait kernel and one copy per peer per chunk on
// rank 0, each with a few microseconds of launch and dependency latency, so
// small messages should stay on the one-kernel path. kCopyEngineMinBytes is
// PROVISIONAL: a back-of-envelope crossover (at 8 MiB both paths come to
// about 30 us on datasheet rates), not a measurement; the lead is to replace
// it by one on 2xH200 (both paths at 4, 8, 16 and 32 MiB shares).
//
// Protocol, per call (every rank makes the same calls):
//  1. Barrier (one block, slot kBarrierSlot of this buffer's pads). On rank 0
//     it follows, on the candidate's stream, the events that end its previous
//     call's pulls, so a sender that passed it may overwrite its staging
//     buffer: a single buffer suffices (no double buffering), and every chunk
//     signal is consumed in the call that puts it (a put never finds its word
//     still set).
//  2. Sender, for each chunk k: stage it (copy kernel), then put_signal to
//     rank 0 in slot kChunkSlot0 + k (release, system scope; the stage
//     kernel's writes precede it in stream order).
//  3. Rank 0, on two side streams (chunk k on stream k % 2, so the wait for
//     chunk k + 1 overlaps the copy of chunk k): wait for chunk k from every
//     peer (acquire), then one cudaMemcpyAsync per peer. Both side streams
//     start from an event recorded on the candidate's stream and are joined
//     back to it before solve() returns (NOTE [timing protocol]: the timed
//     events are on that stream, and unjoined side work is a timing anomaly).
//  Submission order: every operation a peer waits for (barrier, stages,
//  signals) is enqueued before any operation that spins waiting for a peer
//  (the side streams' waits), so even if streams share one hardware queue no
//  spin-wait sits ahead of work a peer needs. Ranks sharing a GPU (NOTE [ranks
//  sharing a GPU]) get CUDA IPC buffers: the peer pointers are IPC mappings on
//  the same device, the copies are local device-to-device copies, and the
//  spin-waits progress as the contexts time-slice.
#include <pkb/device.cuh>
#include <pkb/solution.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {
using namespace pkb::device;

constexpr int kRoot = 0;

// ---- Small messages: one kernel. ----

__global__ void __launch_bounds__(kThreads) gather_kernel(const uint4* x, uint4* out, int64_t n16,
                                                          SymmetricView sym) {
  Share s = block_share(n16);
  copy16(sym.own, x, s);
  sym.barrier();
  if (sym.rank == kRoot)
    for (int p = 0; p < sym.world; ++p) copy16(out + p * n16, sym.peer(p), s);
}

// ---- Large messages: NOTE [large messages by copy engine]. ----

// PROVISIONAL (see the NOTE): a share of at least this many bytes takes the
// copy-engine path.
constexpr size_t kCopyEngineMinBytes = size_t{8} << 20;
// Staged bytes of the first chunk, the most of any chunk, and the chunk count.
// Past about kMaxChunks x kMaxChunkBytes staged, the last chunk takes the
// rest; its staging still hides behind the earlier chunks' pulls while the
// SMs stage several times faster than NVLink drains (to about 1 GB staged).
constexpr size_t kFirstChunkBytes = size_t{1} << 20;
constexpr size_t kMaxChunkBytes = size_t{16} << 20;
constexpr int kMaxChunks = 16;
// Pad slots (rows of W words after the kSlotBase rows SymmetricBuffer keeps).
constexpr int kBarrierSlot = 0;
constexpr int kChunkSlot0 = 1;
// One warp for the signal kernels: thread t handles peer t, so W <= 32.
constexpr int kSignalThreads = 32;
// The local copies (staging, own share): four 16-byte loads in flight per
// thread, kCopyBlocksPerSm blocks per SM: 64 KiB in flight per SM, plenty for
// HBM, and half an SM's threads, so the side streams' one-warp wait kernels
// always find room beside a copy that runs for tens of microseconds (a full
// SM would hold them, and the pulls behind them, until it ends).
constexpr int kCopyThreads = 256;
constexpr int kCopyUnroll = 4;
constexpr int kCopyBlocksPerSm = 4;
constexpr int kSideStreams = 2;

__global__ void __launch_bounds__(kSignalThreads) barrier_kernel(SymmetricView sym) { sym.barrier(kBarrierSlot); }

// The word of rank `to`'s pad through which rank `from` signals chunk slot `slot`.
__device__ __forceinline__ uint32_t* chunk_word(const SymmetricView& sym, int to, int from, int slot) {
  return sym.pads[to] + (kSlotBase + slot) * sym.world + from;
}

// This rank's chunk in `slot` is staged: tell `to` (one thread).
__global__ void __launch_bounds__(kSignalThreads) put_chunk_kernel(SymmetricView sym, int slot, int to) {
  if (threadIdx.x == 0 && to != sym.rank) put_signal(chunk_word(sym, to, sym.rank, slot));
}

// Wait until every peer's chunk in `slot` is staged (thread t waits for peer t).
__global__ void __launch_bounds__(kSignalThreads) wait_chunk_kernel(SymmetricView sym, int slot) {
  const int peer = threadIdx.x;
  if (peer < sym.world && peer != sym.rank) wait_signal(chunk_word(sym, sym.rank, peer, slot));
}

// dst[i] = src[i] for units i in [begin, end), grid-strided, kCopyUnroll
// independent loads in flight per thread.
__global__ void __launch_bounds__(kCopyThreads) copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                            int64_t begin, int64_t end) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kCopyUnroll - 1) * step < end; i += kCopyUnroll * step) {
    uint4 v[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) v[u] = src[i + u * step];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) dst[i + u * step] = v[u];
  }
  for (; i < end; i += step) dst[i] = src[i];
}

void launch_copy(const uint4* src, uint4* dst, int64_t begin, int64_t end, cudaStream_t stream) {
  if (end <= begin) return;
  const int64_t per_block = int64_t{kCopyThreads} * kCopyUnroll;
  const int64_t want = (end - begin + per_block - 1) / per_block;
  const int64_t most = int64_t{kCopyBlocksPerSm} * one_wave_blocks(std::numeric_limits<int64_t>::max());
  copy_kernel<<<static_cast<unsigned>(std::min(want, most)), kCopyThreads, 0, stream>>>(src, dst, begin, end);
  PKB_CUDA_CHECK(cudaGetLastError());
}

// Chunk k is units [b[k], b[k + 1]) of an n16-unit share; the same on every
// rank (a function of n16 alone).
std::vector<int64_t> chunk_bounds(int64_t n16) {
  int64_t len = std::max<int64_t>(1, static_cast<int64_t>(kFirstChunkBytes / 16));
  const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(kMaxChunkBytes / 16));
  std::vector<int64_t> b{0};
  while (b.back() < n16) {
    int64_t next = std::min(n16, b.back() + len);
    // The last chunk takes the rest when the count is reached or the rest is
    // small (a tiny chunk would cost its latencies for little data).
    if (static_cast<int>(b.size()) == kMaxChunks || n16 - next < len / 2) next = n16;
    b.push_back(next);
    len = std::min(2 * len, cap);
  }
  return b;
}

// Made once per process (on its one device) and never destroyed: a static's
// destructor could run after the CUDA runtime has been torn down. The streams
// have the greatest priority, so their small wait kernels are scheduled ahead
// of pending copy blocks.
struct SideStreams {
  cudaStream_t stream[kSideStreams];
  cudaEvent_t start, done[kSideStreams];
};

SideStreams& side_streams() {
  static SideStreams* side = [] {
    auto* s = new SideStreams;
    int least = 0, greatest = 0;
    PKB_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int j = 0; j < kSideStreams; ++j) {
      PKB_CUDA_CHECK(cudaStreamCreateWithPriority(&s->stream[j], cudaStreamNonBlocking, greatest));
      PKB_CUDA_CHECK(cudaEventCreateWithFlags(&s->done[j], cudaEventDisableTiming));
    }
    PKB_CUDA_CHECK(cudaEventCreateWithFlags(&s->start, cudaEventDisableTiming));
    return s;
  }();
  return *side;
}

// The large path; `out` is rank 0's (W, M, N) output (unused elsewhere).
void gather_by_copy_engine(pkb::Context& ctx, const uint4* x, uint4* out, size_t bytes) {
  const int rank = ctx.rank(), world = ctx.world_size();
  const cudaStream_t stream = stream_of(ctx);
  const int64_t n16 = static_cast<int64_t>(bytes / 16);
  if (world == 1) {  // rank 0 alone: its own share needs no peer
    launch_copy(x, out, 0, n16, stream);
    return;
  }
  pkb::SymmetricBuffer& buf = ctx.symmetric("gather_ce_" + std::to_string(bytes), bytes);
  PKB_CHECK(size_t{kSlotBase + kChunkSlot0 + kMaxChunks} * world * sizeof(uint32_t) <= buf.signal_pad_bytes(),
            "signal pad of ", buf.signal_pad_bytes(), " bytes too small for ", world, " ranks");
  const SymmetricView sym = view_of(ctx, buf, 0);
  const std::vector<int64_t> b = chunk_bounds(n16);
  const int chunks = static_cast<int>(b.size()) - 1;

  if (rank != kRoot) {
    barrier_kernel<<<1, kSignalThreads, 0, stream>>>(sym);
    PKB_CUDA_CHECK(cudaGetLastError());
    for (int k = 0; k < chunks; ++k) {
      launch_copy(x, sym.own, b[k], b[k + 1], stream);
      put_chunk_kernel<<<1, kSignalThreads, 0, stream>>>(sym, kChunkSlot0 + k, kRoot);
      PKB_CUDA_CHECK(cudaGetLastError());
    }
    return;
  }

  // Rank 0.
  SideStreams& side = side_streams();
  // The previous call's pulls precede this call's barrier even if it ran on
  // another stream (protocol step 1; a no-op when they are joined already).
  for (int j = 0; j < kSideStreams; ++j) PKB_CUDA_CHECK(cudaStreamWaitEvent(stream, side.done[j], 0));
  // What peers wait for first (the barrier), then the local copy, then the
  // side streams' spin-waits (submission order, see the NOTE).
  PKB_CUDA_CHECK(cudaEventRecord(side.start, stream));
  barrier_kernel<<<1, kSignalThreads, 0, stream>>>(sym);
  PKB_CUDA_CHECK(cudaGetLastError());
  launch_copy(x, out + kRoot * n16, 0, n16, stream);
  for (int j = 0; j < kSideStreams; ++j) PKB_CUDA_CHECK(cudaStreamWaitEvent(side.stream[j], side.start, 0));
  void* const* peers = buf.peer_ptrs_host();
  for (int k = 0; k < chunks; ++k) {
    const cudaStream_t s = side.stream[k % kSideStreams];
    wait_chunk_kernel<<<1, kSignalThreads, 0, s>>>(sym, kChunkSlot0 + k);
    PKB_CUDA_CHECK(cudaGetLastError());
    const size_t len = static_cast<size_t>(b[k + 1] - b[k]) * 16;
    for (int d = 1; d < world; ++d) {
      const int p = (rank + d) % world;
      PKB_CUDA_CHECK(cudaMemcpyAsync(out + p * n16 + b[k], static_cast<const uint4*>(peers[p]) + b[k], len,
                                     cudaMemcpyDeviceToDevice, s));
    }
  }
  for (int j = 0; j < kSideStreams; ++j) {
    PKB_CUDA_CHECK(cudaEventRecord(side.done[j], side.stream[j]));
    PKB_CUDA_CHECK(cudaStreamWaitEvent(stream, side.done[j], 0));
  }
}
}  // namespace

std::vector<at::Tensor> solve(pkb::Context& ctx, const pkb::Inputs& in) {
  const at::Tensor x = in.tensor(0).contiguous();
  PKB_CHECK(x.nbytes() % 16 == 0, "needs data in 16-byte units");
  PKB_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0, "needs 16-byte aligned data");
  const size_t bytes = x.nbytes();
  const int world = ctx.world_size();
  at::Tensor out = x;
  if (ctx.rank() == kRoot) {
    std::vector<int64_t> shape{world};
    for (int64_t d : x.sizes()) shape.push_back(d);
    out = at::empty(shape, x.options());
  }
  const auto* src = static_cast<const uint4*>(x.data_ptr());
  auto* dst = static_cast<uint4*>(out.data_ptr());
  if (bytes >= kCopyEngineMinBytes && world <= kSignalThreads) {
    gather_by_copy_engine(ctx, src, dst, bytes);
  } else {
    const SymmetricView sym = double_buffered(ctx, "gather_" + std::to_string(bytes), bytes);
    const int64_t n16 = static_cast<int64_t>(bytes / 16);
    gather_kernel<<<blocks_for(n16), kThreads, 0, stream_of(ctx)>>>(src, dst, n16, sym);
    PKB_CUDA_CHECK(cudaGetLastError());
  }
  return {ctx.rank() == kRoot ? out : in.tensor(0)};
}

PKB_SOLUTION(solve)
