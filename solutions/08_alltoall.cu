// 08 alltoall: every rank stages its share of each slice of its (W, M, N)
// input; after the barrier rank r pulls that share of slice r from every rank
// p into slice p of its output.
// Double buffering: each call writes the other half of a symmetric buffer of
// twice the payload, so a rank may start its next call while a peer still
// reads this one's half; the next barrier on that half is two calls away, and
// passing it means every peer has finished the call that read it. One
// cross-GPU barrier per call, one kernel launch, no host synchronisation.
#include <pkb/device.cuh>
#include <pkb/solution.h>

namespace {
using namespace pkb::device;

__global__ void __launch_bounds__(kThreads) alltoall_kernel(const uint4* x, uint4* own, void* const* peers,
                                                            size_t offset, uint4* out, int64_t n16,
                                                            uint32_t* const* pads, int rank, int world) {
  Share s = block_share(n16);
  for (int p = 0; p < world; ++p) copy16(own + p * n16, x + p * n16, s);
  block_barrier(pads, rank, world, blockIdx.x);
  for (int k = 0; k < world; ++k) {
    int p = (rank + k) % world;
    copy16(out + p * n16, at_offset(peers, p, offset) + rank * n16, s);
  }
}

// The half of the double-buffered symmetric buffer this call writes. Every
// rank makes the same calls, so the parity agrees across ranks.
size_t next_half(size_t half_bytes) {
  static int64_t calls = 0;
  return static_cast<size_t>(calls++ % 2) * half_bytes;
}

cudaStream_t stream_of(pkb::Context& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }
void* const* peers_of(pkb::SymmetricBuffer& b) { return b.peer_ptrs_device(); }
uint32_t* const* pads_of(pkb::SymmetricBuffer& b) { return reinterpret_cast<uint32_t* const*>(b.signal_pads_device()); }
uint4* mine(pkb::SymmetricBuffer& b, size_t offset) { return reinterpret_cast<uint4*>(static_cast<char*>(b.ptr()) + offset); }
}  // namespace

std::vector<at::Tensor> solve(pkb::Context& ctx, const pkb::Inputs& in) {
  const at::Tensor x = in.tensor(0).contiguous();
  const int world = ctx.world_size();
  PKB_CHECK(x.size(0) == world, "needs a (W, M, N) input");
  at::Tensor out = at::empty_like(x);
  const size_t bytes = x[0].nbytes();
  PKB_CHECK(bytes % 16 == 0, "needs data in 16-byte units");
  pkb::SymmetricBuffer& buf = ctx.symmetric("alltoall_" + std::to_string(bytes), 2 * world * bytes);
  const size_t off = next_half(world * bytes);
  const int64_t n16 = bytes / 16;
  alltoall_kernel<<<one_wave_blocks((n16 + kThreads - 1) / kThreads), kThreads, 0, stream_of(ctx)>>>(
      static_cast<const uint4*>(x.data_ptr()), mine(buf, off), peers_of(buf), off,
      static_cast<uint4*>(out.data_ptr()), n16, pads_of(buf), ctx.rank(), world);
  PKB_CUDA_CHECK(cudaGetLastError());
  return {out};
}

PKB_SOLUTION(solve)
