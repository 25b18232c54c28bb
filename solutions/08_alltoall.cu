// 08 alltoall: every rank stages its share of each slice of its (W, M, N)
// input; after the barrier rank r pulls that share of slice r from every rank
// p into slice p of its output.
// The buffer is double-buffered (NOTE [double buffering] in pkb/device.cuh):
// one cross-GPU barrier per call, one kernel launch, no host synchronisation.
#include <pkb/device.cuh>
#include <pkb/solution.h>

namespace {
using namespace pkb::device;

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
}  // namespace

std::vector<at::Tensor> solve(pkb::Context& ctx, const pkb::Inputs& in) {
  const at::Tensor x = in.tensor(0).contiguous();
  const int world = ctx.world_size();
  PKB_CHECK(x.size(0) == world, "needs a (W, M, N) input");
  at::Tensor out = at::empty_like(x);
  const size_t bytes = x[0].nbytes();
  PKB_CHECK(bytes % 16 == 0, "needs data in 16-byte units");
  const SymmetricView sym = double_buffered(ctx, "alltoall_" + std::to_string(bytes), world * bytes);
  const int64_t n16 = bytes / 16;
  alltoall_kernel<<<blocks_for(n16), kThreads, 0, stream_of(ctx)>>>(
      static_cast<const uint4*>(x.data_ptr()), static_cast<uint4*>(out.data_ptr()), n16, sym);
  PKB_CUDA_CHECK(cudaGetLastError());
  return {out};
}

PKB_SOLUTION(solve)
