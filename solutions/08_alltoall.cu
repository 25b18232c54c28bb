// 08 alltoall: slice p of rank r's (W, M, N) input lands in slice r of rank
// p's output. Two paths, by the size of one slice (one rank-to-rank message):
//
//  - small (below kCopyEngineMinBytes): one kernel. Every rank stages its
//    share of each slice of its input; after the barrier rank r pulls that
//    share of slice r from every rank p into slice p of its output. The
//    buffer is double-buffered (NOTE [double buffering] in pkb/device.cuh):
//    one cross-GPU barrier per call, one kernel launch, no host
//    synchronisation. Lowest fixed cost.
//  - large: the copy-engine path of NOTE [large messages by copy engine] in
//    06_gather.cu (each solution is one self-contained file, so the helpers
//    below repeat that file's; keep the two in step), with every rank both a
//    sender and a receiver. Per call: a barrier; then each rank stages chunk
//    k of every slice bound for a peer (its own slice r is not staged) and
//    signals every peer; each rank's copy engines pull chunk k of slice r
//    from every peer as soon as that peer signals it; each rank's SMs copy
//    its own slice r from input to output meanwhile.
//
// Why: on 2xH200 at 4096x8192 bf16 (64 MiB a slice) the one-kernel path ran
// at 0.77x of NCCL (issue 17). Our reading (not profiled): in sequence on the
// same SMs it stages all W slices (a local W x 64 MiB copy, the own slice
// included), barriers, then pulls every slice, its own included, with one
// 16-byte load per thread per step. The large path stages only the W - 1
// slices that cross NVLink, in chunks overlapped with the copy engines'
// pulls (DMA near the link's rate, no SM time), and copies the own slice
// straight to the output in parallel. Staging itself cannot go: only
// symmetric buffers are peer-mapped, and the output must be a tensor of its
// own. Chunks are sized by the staged bytes (all W - 1 slices of a chunk), so
// the exposed first chunk stays about kFirstChunkBytes whatever W is.
//
// kCopyEngineMinBytes is PROVISIONAL, as in 06_gather.cu: a back-of-envelope
// crossover, to be replaced by the lead's measurement on 2xH200.
//
// The protocol's safety argument is 06_gather.cu's, for every rank at once:
// a rank's barrier follows, on the candidate's stream, the join of its
// previous call's pulls, so a rank past the barrier may restage its single
// buffer; every chunk signal is consumed in the call that puts it; every
// operation a peer waits for is enqueued before any spin-wait for a peer.
#include <pkb/device.cuh>
#include <pkb/solution.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {
using namespace pkb::device;

// ---- Small messages: one kernel. ----

__global__ void __launch_bounds__(kThreads) alltoall_kernel(const uint4* x, uint4* out, int64_t n16,
                                                            SymmetricView sym) {
  Share s = block_share(n16);
  copy16_slices(sym.own, x, sym.world, n16, s);
  sym.barrier();
  for (int k = 0; k < sym.world; ++k) {
    int p = (sym.rank + k) % sym.world;
    copy16(out + p * n16, sym.peer(p) + sym.rank * n16, s);
  }
}

// ---- Large messages: NOTE [large messages by copy engine] in 06_gather.cu. ----

// PROVISIONAL: a slice of at least this many bytes takes the copy-engine path.
constexpr size_t kCopyEngineMinBytes = size_t{8} << 20;
// Staged bytes (over all W - 1 slices) of the first chunk, the most of any
// chunk, and the chunk count.
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

// This rank's chunk in `slot` is staged: tell every peer (thread t tells peer t).
__global__ void __launch_bounds__(kSignalThreads) put_chunk_kernel(SymmetricView sym, int slot) {
  const int peer = threadIdx.x;
  if (peer < sym.world && peer != sym.rank) put_signal(chunk_word(sym, peer, sym.rank, slot));
}

// Wait until every peer's chunk in `slot` is staged (thread t waits for peer t).
__global__ void __launch_bounds__(kSignalThreads) wait_chunk_kernel(SymmetricView sym, int slot) {
  const int peer = threadIdx.x;
  if (peer < sym.world && peer != sym.rank) wait_signal(chunk_word(sym, sym.rank, peer, slot));
}

// For slice q = blockIdx.y (slice `skip` left out): dst[q * stride + i] =
// src[q * stride + i] for units i in [begin, end), grid-strided, kCopyUnroll
// independent loads in flight per thread.
__global__ void __launch_bounds__(kCopyThreads) copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                            int64_t stride, int skip, int64_t begin, int64_t end) {
  if (static_cast<int>(blockIdx.y) == skip) return;
  src += blockIdx.y * stride;
  dst += blockIdx.y * stride;
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

// copy_kernel over `slices` slices `stride` units apart.
void launch_copy(const uint4* src, uint4* dst, int64_t stride, int slices, int skip, int64_t begin, int64_t end,
                 cudaStream_t stream) {
  if (end <= begin || slices < 1) return;
  const int64_t per_block = int64_t{kCopyThreads} * kCopyUnroll;
  const int64_t want = (end - begin + per_block - 1) / per_block;
  const int64_t most = int64_t{kCopyBlocksPerSm} * one_wave_blocks(std::numeric_limits<int64_t>::max());
  const dim3 grid(static_cast<unsigned>(std::min(want, most)), static_cast<unsigned>(slices));
  copy_kernel<<<grid, kCopyThreads, 0, stream>>>(src, dst, stride, skip, begin, end);
  PKB_CUDA_CHECK(cudaGetLastError());
}

// Chunk k is units [b[k], b[k + 1]) of each n16-unit slice, `staged` slices
// staged per chunk; the same on every rank (a function of n16 and W alone).
std::vector<int64_t> chunk_bounds(int64_t n16, int staged) {
  const int64_t unit_bytes = int64_t{16} * std::max(staged, 1);
  int64_t len = std::max<int64_t>(1, static_cast<int64_t>(kFirstChunkBytes) / unit_bytes);
  const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(kMaxChunkBytes) / unit_bytes);
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

// The large path; n16 units a slice.
void alltoall_by_copy_engine(pkb::Context& ctx, const uint4* x, uint4* out, int64_t n16) {
  const int rank = ctx.rank(), world = ctx.world_size();
  const cudaStream_t stream = stream_of(ctx);
  const size_t bytes = static_cast<size_t>(n16) * 16;
  if (world == 1) {
    launch_copy(x, out, 0, 1, -1, 0, n16, stream);
    return;
  }
  pkb::SymmetricBuffer& buf = ctx.symmetric("alltoall_ce_" + std::to_string(bytes), world * bytes);
  PKB_CHECK(size_t{kSlotBase + kChunkSlot0 + kMaxChunks} * world * sizeof(uint32_t) <= buf.signal_pad_bytes(),
            "signal pad of ", buf.signal_pad_bytes(), " bytes too small for ", world, " ranks");
  const SymmetricView sym = view_of(ctx, buf, 0);
  const std::vector<int64_t> b = chunk_bounds(n16, world - 1);
  const int chunks = static_cast<int>(b.size()) - 1;
  SideStreams& side = side_streams();

  // The previous call's pulls precede this call's barrier even if it ran on
  // another stream (protocol step 1; a no-op when they are joined already).
  for (int j = 0; j < kSideStreams; ++j) PKB_CUDA_CHECK(cudaStreamWaitEvent(stream, side.done[j], 0));
  // Everything peers wait for first (barrier, stages, signals), then the own
  // slice, then the side streams' spin-waits (submission order, see the NOTE).
  PKB_CUDA_CHECK(cudaEventRecord(side.start, stream));
  barrier_kernel<<<1, kSignalThreads, 0, stream>>>(sym);
  PKB_CUDA_CHECK(cudaGetLastError());
  for (int k = 0; k < chunks; ++k) {
    // Slice q of the input is staged at slice q of this rank's buffer, for rank q to pull.
    launch_copy(x, sym.own, n16, world, rank, b[k], b[k + 1], stream);
    put_chunk_kernel<<<1, kSignalThreads, 0, stream>>>(sym, kChunkSlot0 + k);
    PKB_CUDA_CHECK(cudaGetLastError());
  }
  launch_copy(x + rank * n16, out + rank * n16, 0, 1, -1, 0, n16, stream);

  for (int j = 0; j < kSideStreams; ++j) PKB_CUDA_CHECK(cudaStreamWaitEvent(side.stream[j], side.start, 0));
  void* const* peers = buf.peer_ptrs_host();
  for (int k = 0; k < chunks; ++k) {
    const cudaStream_t s = side.stream[k % kSideStreams];
    wait_chunk_kernel<<<1, kSignalThreads, 0, s>>>(sym, kChunkSlot0 + k);
    PKB_CUDA_CHECK(cudaGetLastError());
    const size_t len = static_cast<size_t>(b[k + 1] - b[k]) * 16;
    for (int d = 1; d < world; ++d) {
      const int p = (rank + d) % world;  // spread the peers over the links
      const uint4* from = static_cast<const uint4*>(peers[p]) + rank * n16 + b[k];
      PKB_CUDA_CHECK(cudaMemcpyAsync(out + p * n16 + b[k], from, len, cudaMemcpyDeviceToDevice, s));
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
  const int world = ctx.world_size();
  PKB_CHECK(x.size(0) == world, "needs a (W, M, N) input");
  PKB_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0, "needs 16-byte aligned data");
  at::Tensor out = at::empty_like(x);
  const size_t bytes = x[0].nbytes();
  PKB_CHECK(bytes % 16 == 0, "needs data in 16-byte units");
  const int64_t n16 = static_cast<int64_t>(bytes / 16);
  const auto* src = static_cast<const uint4*>(x.data_ptr());
  auto* dst = static_cast<uint4*>(out.data_ptr());
  if (bytes >= kCopyEngineMinBytes && world <= kSignalThreads) {
    alltoall_by_copy_engine(ctx, src, dst, n16);
  } else {
    const SymmetricView sym = double_buffered(ctx, "alltoall_" + std::to_string(bytes), world * bytes);
    alltoall_kernel<<<blocks_for(n16), kThreads, 0, stream_of(ctx)>>>(src, dst, n16, sym);
    PKB_CUDA_CHECK(cudaGetLastError());
  }
  return {out};
}

PKB_SOLUTION(solve)
