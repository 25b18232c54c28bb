// 01 allreduce: one-shot all-reduce in one kernel. Each block copies its share
// of the input into this rank's symmetric buffer, meets the matching block of
// every peer (block_barrier), then sums that share from every rank's buffer.
// The buffer is double-buffered (NOTE [double buffering] in pkb/device.cuh):
// one cross-GPU barrier per call, one kernel launch, no host synchronisation.
#include <pkb/device.cuh>
#include <pkb/solution.h>

namespace {
using namespace pkb::device;

__global__ void __launch_bounds__(kThreads) allreduce_kernel(const uint4* x, uint4* out, int64_t n16,
                                                             SymmetricView sym) {
  Share s = block_share(n16);
  copy16(sym.own, x, s);
  sym.barrier();
  sum16_bf16(out, sym.peers, sym.offset, sym.world, s);
}
}  // namespace

std::vector<at::Tensor> solve(pkb::Context& ctx, const pkb::Inputs& in) {
  const at::Tensor x = in.tensor(0).contiguous();
  PKB_CHECK(x.scalar_type() == at::kBFloat16 && x.nbytes() % 16 == 0, "needs bf16 data in 16-byte units");
  const size_t bytes = x.nbytes();
  const SymmetricView sym = double_buffered(ctx, "allreduce_" + std::to_string(bytes), bytes);
  at::Tensor out = at::empty_like(x);
  const int64_t n16 = bytes / 16;
  allreduce_kernel<<<blocks_for(n16), kThreads, 0, stream_of(ctx)>>>(
      static_cast<const uint4*>(x.data_ptr()), static_cast<uint4*>(out.data_ptr()), n16, sym);
  PKB_CUDA_CHECK(cudaGetLastError());
  return {out};
}

PKB_SOLUTION(solve)
