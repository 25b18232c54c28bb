// PhysicsNeMo's distributed 2-D real-to-complex FFT of a width-sharded field:
// a full complex FFT along the (complete) height, an all-to-all that trades
// the width shards for height shards, a full complex FFT along the width,
// and truncation to the Wd/2 + 1 non-negative frequencies. Rank r ends with
// rows [r·H/W, (r+1)·H/W) of rfft2(x_full, norm="ortho").
#include "../blocks/round_up.h"
#include "../blocks/shared_seed_draw.h"
#include "pkb/integrity.h"
#include "pkb/problem.h"

#include <algorithm>
#include <cmath>
#include <variant>

namespace {

const pkb::ProblemSpec kSpec{59, "physicsnemo_distributed_rfft",
                             "2-D real-to-complex FFT of a width-sharded field via FFT -> all-to-all transpose -> FFT "
                             "-> truncate",
                             "Geometric/Spatial", "NVIDIA PhysicsNeMo (distributed FFT utilities)", "any"};

using namespace pkb::blocks;

class PhysicsnemoDistributedRfft : public pkb::ProblemWithSpec<kSpec, SharedSeedDraw> {
 public:
  // Seeded with rank 0 on every rank (seed(59, 0, trial)): the full
  // (B, H, Wd) float32 field is identical everywhere; rank r keeps columns
  // [r·Wl, (r+1)·Wl). float32 regardless of the harness dtype.
  pkb::Inputs draw(const pkb::InputRequest& req, uint64_t seed) const override {
    at::manual_seed(seed);
    const int64_t b = std::max<int64_t>(1, req.m / 64);
    const int64_t h = round_up(std::max<int64_t>(16, req.m), req.world);
    const int64_t wd = round_up(std::max<int64_t>(16, req.n), req.world);
    const int64_t wl = wd / req.world;
    at::Tensor full = at::randn({b, h, wd}, req.options(at::kFloat));
    return {{"x", full.narrow(2, req.rank * wl, wl).contiguous()}, {"s.0", h}, {"s.1", wd}, {"dim.0", int64_t{1}},
            {"dim.1", int64_t{2}}, {"norm", std::string("ortho")}, {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& x = in.tensor(0);
    const int64_t n0 = in.integer(1), n1 = in.integer(2);
    const int64_t dim0 = in.integer(3), dim1 = in.integer(4);
    const std::string& norm = in.str(5);
    const int64_t world = comm.world_size();

    at::Tensor x1 = at::fft_fft(x, n0, dim0, norm);  // complex64, full length along dim0

    // dist.all_to_all of the W contiguous dim0-chunks: chunk j goes to rank
    // j; the received blocks are concatenated along dim1 in source order.
    // The facade moves them as one (W, ...) buffer, complex viewed as real
    // pairs (what torch.distributed does for complex tensors).
    const int64_t chunk = x1.size(dim0) / world;
    at::Tensor send = at::stack(at::split(x1, chunk, dim0), 0).contiguous();
    at::Tensor send_real = at::view_as_real(send).contiguous();
    at::Tensor recv_real = at::empty_like(send_real);
    comm.all_to_all_single(recv_real, send_real);
    at::Tensor recv = at::view_as_complex(recv_real);
    at::Tensor x1_tran = at::cat(recv.unbind(0), dim1);

    at::Tensor x2 = at::fft_fft(x1_tran, n1, dim1, norm);
    return {x2.narrow(dim1, 0, x2.size(dim1) / 2 + 1).contiguous()};
  }

  // Per rank, X = B·H·Wl elements of the local shard, Wd = W·Wl:
  //   NVLink: the all-to-all sends (W-1)/W of the complex64 FFT output:
  //           (W-1)/W·X·8 bytes;
  //   HBM:    x read (4·X), the first FFT's output written and read (16·X),
  //           the all-to-all pack and the concatenation (32·X), the second
  //           FFT read and written (16·X), the truncated output (8·B·(H/W)·(Wd/2+1));
  //   FLOPs:  5·n·log2(n) per complex transform of length n:
  //           5·B·Wl·H·log2(H) + 5·B·(H/W)·Wd·log2(Wd).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& x = in.tensor(0);
    const double b = x.size(0), h = x.size(1), wl = x.size(2), w = world, wd = wl * w;
    const double elems = b * h * wl;
    return {/*nvlink_bytes_per_rank=*/(w - 1) / w * elems * 8.0,
            /*hbm_bytes_per_rank=*/4.0 * elems + 16.0 * elems + 32.0 * elems + 16.0 * elems +
                8.0 * b * (h / w) * (wd / 2 + 1),
            /*flops_per_rank=*/5.0 * b * wl * h * std::log2(h) + 5.0 * b * (h / w) * wd * std::log2(wd)};
  }
};

}  // namespace

PKB_PROBLEM(PhysicsnemoDistributedRfft)
