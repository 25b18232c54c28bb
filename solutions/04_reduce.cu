// 04 reduce: every rank stages its share; after the barrier rank 0 sums that
// share from every rank. Other ranks return their input unchanged (their
// output's values are not part of the contract; see the problem README).
// Double buffering: each call writes the other half of a symmetric buffer of
// twice the payload, so a rank may start its next call while a peer still
// reads this one's half; the next barrier on that half is two calls away, and
// passing it means every peer has finished the call that read it. One
// cross-GPU barrier per call, one kernel launch, no host synchronisation.
#include <pkb/device.cuh>
#include <pkb/solution.h>

namespace {
using namespace pkb::device;

__global__ void __launch_bounds__(kThreads) reduce_kernel(const uint4* x, uint4* own, void* const* peers,
                                                          size_t offset, uint4* out, int64_t n16,
                                                          uint32_t* const* pads, int rank, int world, int root) {
  Share s = block_share(n16);
  copy16(own, x, s);
  block_barrier(pads, rank, world, blockIdx.x);
  if (rank == root) sum16_bf16(out, peers, offset, world, s);
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
  const int root = static_cast<int>(in.integer(1));
  PKB_CHECK(x.scalar_type() == at::kBFloat16 && x.nbytes() % 16 == 0, "needs bf16 data in 16-byte units");
  const size_t bytes = x.nbytes();
  pkb::SymmetricBuffer& buf = ctx.symmetric("reduce_" + std::to_string(bytes), 2 * bytes);
  const size_t off = next_half(bytes);
  at::Tensor out = ctx.rank() == root ? at::empty_like(x) : x;
  const int64_t n16 = bytes / 16;
  reduce_kernel<<<one_wave_blocks((n16 + kThreads - 1) / kThreads), kThreads, 0, stream_of(ctx)>>>(
      static_cast<const uint4*>(x.data_ptr()), mine(buf, off), peers_of(buf), off,
      static_cast<uint4*>(out.data_ptr()), n16, pads_of(buf), ctx.rank(), ctx.world_size(), root);
  PKB_CUDA_CHECK(cudaGetLastError());
  return {out};
}

PKB_SOLUTION(solve)
