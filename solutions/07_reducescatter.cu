// 07 reducescatter: every rank stages its share of each of the W row blocks of
// its (W*M, N) input; after the barrier rank r sums that share of row block r
// from every rank. Each rank reads (W-1)/W of the input from its peers: the
// bandwidth lower bound.
// The buffer is double-buffered (NOTE [double buffering] in pkb/device.cuh):
// one cross-GPU barrier per call, one kernel launch, no host synchronisation.
#include <pkb/device.cuh>
#include <pkb/solution.h>

namespace {
using namespace pkb::device;

__global__ void __launch_bounds__(kThreads) reducescatter_kernel(const uint4* x, uint4* out, int64_t n16,
                                                                 SymmetricView sym) {
  Share s = block_share(n16);
  copy16_slices(sym.own, x, sym.world, n16, s);
  sym.barrier();
  sum16_bf16(out, sym.peers, sym.offset + static_cast<size_t>(sym.rank) * n16 * 16, sym.world, s);
}
}  // namespace

std::vector<at::Tensor> solve(pkb::Context& ctx, const pkb::Inputs& in) {
  const at::Tensor x = in.tensor(0).contiguous();
  const int world = ctx.world_size();
  PKB_CHECK(x.scalar_type() == at::kBFloat16 && x.size(0) % world == 0, "needs bf16 rows divisible by W");
  at::Tensor out = at::empty({x.size(0) / world, x.size(1)}, x.options());
  const size_t bytes = out.nbytes();
  PKB_CHECK(bytes % 16 == 0, "needs data in 16-byte units");
  const SymmetricView sym = double_buffered(ctx, "reducescatter_" + std::to_string(bytes), world * bytes);
  const int64_t n16 = bytes / 16;
  reducescatter_kernel<<<blocks_for(n16), kThreads, 0, stream_of(ctx)>>>(
      static_cast<const uint4*>(x.data_ptr()), static_cast<uint4*>(out.data_ptr()), n16, sym);
  PKB_CUDA_CHECK(cudaGetLastError());
  return {out};
}

PKB_SOLUTION(solve)
