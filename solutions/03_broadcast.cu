// 03 broadcast: rank 0's blocks stage their share of the input in its
// symmetric buffer; after the barrier every rank (rank 0 included) pulls that
// share from rank 0. The other ranks' inputs are not read.
// The buffer is double-buffered (NOTE [double buffering] in pkb/device.cuh):
// one cross-GPU barrier per call, one kernel launch, no host synchronisation.
#include <pkb/device.cuh>
#include <pkb/solution.h>

namespace {
using namespace pkb::device;

constexpr int kRoot = 0;

__global__ void __launch_bounds__(kThreads) broadcast_kernel(const uint4* x, uint4* out, int64_t n16,
                                                             SymmetricView sym) {
  Share s = block_share(n16);
  if (sym.rank == kRoot) copy16(sym.own, x, s);
  sym.barrier();
  copy16(out, sym.peer(kRoot), s);
}
}  // namespace

std::vector<at::Tensor> solve(pkb::Context& ctx, const pkb::Inputs& in) {
  const at::Tensor x = in.tensor(0).contiguous();
  PKB_CHECK(x.nbytes() % 16 == 0, "needs data in 16-byte units");
  const size_t bytes = x.nbytes();
  const SymmetricView sym = double_buffered(ctx, "broadcast_" + std::to_string(bytes), bytes);
  at::Tensor out = at::empty_like(x);
  const int64_t n16 = bytes / 16;
  broadcast_kernel<<<blocks_for(n16), kThreads, 0, stream_of(ctx)>>>(
      static_cast<const uint4*>(x.data_ptr()), static_cast<uint4*>(out.data_ptr()), n16, sym);
  PKB_CUDA_CHECK(cudaGetLastError());
  return {out};
}

PKB_SOLUTION(solve)
