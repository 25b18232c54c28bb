// 04 reduce: every rank stages its share; after the barrier rank 0 sums that
// share from every rank. Other ranks return their input unchanged (their
// output's values are not part of the contract; see the problem README).
// The buffer is double-buffered (NOTE [double buffering] in pkb/device.cuh):
// one cross-GPU barrier per call, one kernel launch, no host synchronisation.
#include <pkb/device.cuh>
#include <pkb/solution.h>

namespace {
using namespace pkb::device;

__global__ void __launch_bounds__(kThreads) reduce_kernel(const uint4* x, uint4* out, int64_t n16,
                                                          SymmetricView sym, int root) {
  Share s = block_share(n16);
  copy16(sym.own, x, s);
  sym.barrier();
  if (sym.rank == root) sum16_bf16(out, sym.peers, sym.offset, sym.world, s);
}
}  // namespace

std::vector<at::Tensor> solve(pkb::Context& ctx, const pkb::Inputs& in) {
  const at::Tensor x = in.tensor(0).contiguous();
  const int root = static_cast<int>(in.integer(1));
  PKB_CHECK(x.scalar_type() == at::kBFloat16 && x.nbytes() % 16 == 0, "needs bf16 data in 16-byte units");
  const size_t bytes = x.nbytes();
  const SymmetricView sym = double_buffered(ctx, "reduce_" + std::to_string(bytes), bytes);
  at::Tensor out = ctx.rank() == root ? at::empty_like(x) : x;
  const int64_t n16 = bytes / 16;
  reduce_kernel<<<blocks_for(n16), kThreads, 0, stream_of(ctx)>>>(
      static_cast<const uint4*>(x.data_ptr()), static_cast<uint4*>(out.data_ptr()), n16, sym, root);
  PKB_CUDA_CHECK(cudaGetLastError());
  return {out};
}

PKB_SOLUTION(solve)
