// 05 scatter: rank 0's blocks stage their share of every slice of its
// (W, M, N) input; after the barrier rank r pulls that share of slice r.
// The buffer is double-buffered (NOTE [double buffering] in pkb/device.cuh):
// one cross-GPU barrier per call, one kernel launch, no host synchronisation.
#include <pkb/device.cuh>
#include <pkb/solution.h>

namespace {
using namespace pkb::device;

constexpr int kRoot = 0;

__global__ void __launch_bounds__(kThreads) scatter_kernel(const uint4* x, uint4* out, int64_t n16,
                                                           SymmetricView sym) {
  Share s = block_share(n16);
  if (sym.rank == kRoot) copy16_slices(sym.own, x, sym.world, n16, s);
  sym.barrier();
  copy16(out, sym.peer(kRoot) + sym.rank * n16, s);
}
}  // namespace

std::vector<at::Tensor> solve(pkb::Context& ctx, const pkb::Inputs& in) {
  const at::Tensor x = in.tensor(0).contiguous();
  const int world = ctx.world_size();
  // Rank 0 holds (W, M, N); the others hold an (M, N) tensor of zeros.
  at::Tensor out = ctx.rank() == kRoot ? at::empty_like(x[0]) : at::empty_like(x);
  const size_t bytes = out.nbytes();
  PKB_CHECK(bytes % 16 == 0, "needs data in 16-byte units");
  const SymmetricView sym = double_buffered(ctx, "scatter_" + std::to_string(bytes), world * bytes);
  const int64_t n16 = bytes / 16;
  scatter_kernel<<<blocks_for(n16), kThreads, 0, stream_of(ctx)>>>(
      static_cast<const uint4*>(x.data_ptr()), static_cast<uint4*>(out.data_ptr()), n16, sym);
  PKB_CUDA_CHECK(cudaGetLastError());
  return {out};
}

PKB_SOLUTION(solve)
