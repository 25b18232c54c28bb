// 02 allgather: each block stages its share of the input in this rank's
// symmetric buffer, meets the matching block of every peer, then pulls that
// share of every rank's tensor into slice r of the (W, M, N) output.
// The buffer is double-buffered (NOTE [double buffering] in pkb/device.cuh):
// one cross-GPU barrier per call, one kernel launch, no host synchronisation.
#include <pkb/device.cuh>
#include <pkb/solution.h>

namespace {
using namespace pkb::device;

__global__ void __launch_bounds__(kThreads) allgather_kernel(const uint4* x, uint4* out, int64_t n16,
                                                             SymmetricView sym) {
  Share s = block_share(n16);
  copy16(sym.own, x, s);
  sym.barrier();
  for (int k = 0; k < sym.world; ++k) {
    int p = (sym.rank + k) % sym.world;  // start with self, then spread the peers over the links
    copy16(out + p * n16, sym.peer(p), s);
  }
}
}  // namespace

std::vector<at::Tensor> solve(pkb::Context& ctx, const pkb::Inputs& in) {
  const at::Tensor x = in.tensor(0).contiguous();
  PKB_CHECK(x.nbytes() % 16 == 0, "needs data in 16-byte units");
  const size_t bytes = x.nbytes();
  const int world = ctx.world_size();
  const SymmetricView sym = double_buffered(ctx, "allgather_" + std::to_string(bytes), bytes);
  std::vector<int64_t> shape{world};
  for (int64_t d : x.sizes()) shape.push_back(d);
  at::Tensor out = at::empty(shape, x.options());
  const int64_t n16 = bytes / 16;
  allgather_kernel<<<blocks_for(n16), kThreads, 0, stream_of(ctx)>>>(
      static_cast<const uint4*>(x.data_ptr()), static_cast<uint4*>(out.data_ptr()), n16, sym);
  PKB_CUDA_CHECK(cudaGetLastError());
  return {out};
}

PKB_SOLUTION(solve)
