// Distributed DISCO spherical convolution (torch-harmonics
// DistributedDiscreteContinuousConvS2): an azimuth all-to-all gives every rank
// full longitudes for a channel subset, the sparse psi tensor is contracted
// with every longitude shift of the input, the partial results are summed
// over the polar group, the azimuth transpose is undone, and the channels are
// mixed by the weight (plus bias).
//
// Departures from the published code (see README): psi is passed as its COO
// indices, values and sizes (a sparse tensor cannot travel through pkb's
// inputs), and the contraction is computed with dense ops (gather +
// index_add) instead of 256 sparse bmm calls with a roll between them: the
// published reference could not be recorded on CUDA (a sparse-tensor error),
// and no sparse op runs here. The math is the same.
#include "../blocks/round_up.h"
#include "pkb/memory_estimate.h"
#include "pkb/problem.h"

#include <algorithm>
#include <map>
#include <utility>

namespace {

const pkb::ProblemSpec kSpec{62, "torchharmonics_spherical_convolution",
                             "Distributed DISCO spherical convolution: azimuth all-to-all transposes, sparse psi "
                             "contraction with longitude rolls, polar all-reduce, channel mixing",
                             "Geometric/Spatial", "torch-harmonics (DistributedDiscreteContinuousConvS2)",
                             "any (azimuth 2 if W even else 1; polar W/azimuth)"};

constexpr int64_t kBatch = 32, kInChannels = 8, kOutChannels = 8, kKernel = 3, kGroups = 1;

using pkb::blocks::round_up;

// The published _compute_split_shapes.
std::vector<int64_t> split_shapes(int64_t size, int64_t chunks) {
  if (chunks == 1) return {size};
  int64_t chunk = (size + chunks - 1) / chunks;
  int64_t last = std::max<int64_t>(0, size - chunk * (chunks - 1));
  if (last == 0) {
    chunk = size / chunks;
    last = size - chunk * (chunks - 1);
  }
  std::vector<int64_t> s(chunks - 1, chunk);
  s.push_back(last);
  return s;
}

int64_t azimuth_size_for(int64_t world) { return world % 2 == 0 ? 2 : 1; }

class TorchharmonicsSphericalConvolution : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Groups first (no RNG), then x, weight, bias and the psi values, as
  // published; psi's pattern is deterministic. Inputs: x, psi.indices (3, nnz)
  // int64, psi.values (nnz,) fp32, psi.size.0..2, weight, groups, nlon_out,
  // nlon_in, azimuth_group, polar_group, bias.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const int64_t world = req.world, rank = req.rank;
    const int64_t az = azimuth_size_for(world), polar = world / az;
    const int64_t az_rank = rank % az, polar_rank = rank / az;
    const int64_t nlat_in = round_up(128, polar), nlon_in = round_up(2 * nlat_in, az);
    const int64_t nlat_out = nlat_in, nlon_out = nlon_in;
    const int64_t nlat_local = round_up(nlat_in, polar) / polar, nlon_local = round_up(nlon_in, az) / az;
    auto f32 = req.options(at::kFloat);

    at::Tensor x = at::randn({kBatch, kInChannels, nlat_local, nlon_local}, f32);
    at::Tensor weight = at::randn({kOutChannels, kInChannels / kGroups, kKernel}, f32);
    at::Tensor bias = at::randn({kOutChannels}, f32);
    const int64_t per_row = std::min<int64_t>(4, nlat_local * nlon_in);
    const int64_t nnz = kKernel * nlat_out * per_row;
    at::Tensor vals = at::randn({nnz}, f32) * 0.05;
    std::vector<int64_t> idx(3 * nnz);
    int64_t cursor = 0;
    const int64_t lat_offset = polar_rank * nlat_local;
    for (int64_t k = 0; k < kKernel; ++k)
      for (int64_t lat = 0; lat < nlat_out; ++lat) {
        const int64_t local_lat = ((lat - lat_offset) % nlat_local + nlat_local) % nlat_local;
        for (int64_t e = 0; e < per_row; ++e, ++cursor) {
          idx[cursor] = k;
          idx[nnz + cursor] = lat;
          idx[2 * nnz + cursor] = local_lat * nlon_in + (lat + e * (k + 1)) % nlon_in;
        }
      }
    // coalesce() of the published builder: entries sorted by (k, lat, col)
    // (they are distinct, so nothing is summed). Done on the host without a
    // sparse tensor, so no sparse op runs on the device.
    const int64_t cols = nlat_local * nlon_in;
    std::vector<int64_t> order(nnz);
    for (int64_t e = 0; e < nnz; ++e) order[e] = e;
    auto key = [&](int64_t e) { return (idx[e] * nlat_out + idx[nnz + e]) * cols + idx[2 * nnz + e]; };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(a) < key(b); });
    std::vector<int64_t> sorted(3 * nnz);
    for (int64_t e = 0; e < nnz; ++e) {
      PKB_CHECK(e == 0 || key(order[e]) != key(order[e - 1]), "psi has a duplicate entry");
      for (int64_t d = 0; d < 3; ++d) sorted[d * nnz + e] = idx[d * nnz + order[e]];
    }
    at::Tensor indices = at::tensor(sorted, at::kLong).view({3, nnz}).to(req.device);
    at::Tensor values = vals.index_select(0, at::tensor(order, at::kLong).to(req.device)).contiguous();

    pkb::Inputs in{{"x", x}, {"psi.indices", indices}, {"psi.values", values}, {"psi.size.0", kKernel},
                   {"psi.size.1", nlat_out}, {"psi.size.2", cols}, {"weight", weight}, {"groups", kGroups},
                   {"nlon_out", nlon_out}, {"nlon_in", nlon_in}};
    std::vector<int64_t> az_ranks, polar_ranks;
    for (int64_t a = 0; a < az; ++a) az_ranks.push_back(polar_rank * az + a);
    for (int64_t p = 0; p < polar; ++p) polar_ranks.push_back(p * az + az_rank);
    in.add("azimuth_group", pkb::GroupRanks{az_ranks});
    in.add("polar_group", pkb::GroupRanks{polar_ranks});
    in.add("bias", bias);
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    at::Tensor x = in.tensor(0);
    const at::Tensor& psi_idx = in.tensor(1);
    const at::Tensor& psi_val = in.tensor(2);
    const int64_t kernel = in.integer(3), nlat_out = in.integer(4);
    const at::Tensor& weight = in.tensor(6);
    const int64_t groups = in.integer(7), nlon_out = in.integer(8), nlon_in = in.integer(9);
    const std::vector<int64_t>& az_ranks = in.group(10).ranks;
    const std::vector<int64_t>& polar_ranks = in.group(11).ranks;
    const at::Tensor& bias = in.tensor(12);

    build_layout(comm, static_cast<int64_t>(az_ranks.size()));
    const int64_t az = static_cast<int64_t>(az_ranks.size()), polar = static_cast<int64_t>(polar_ranks.size());
    const int64_t me = comm.rank();
    const int64_t az_rank = std::find(az_ranks.begin(), az_ranks.end(), me) - az_ranks.begin();
    const int64_t polar_rank = std::find(polar_ranks.begin(), polar_ranks.end(), me) - polar_ranks.begin();
    const int64_t channels = x.size(1);

    if (az > 1) {
      x = at::cat(transpose(comm, resolve(comm, az_ranks), x, 1, 3, split_shapes(nlon_in, az), az_rank), 3);
    }

    x = contraction(x, psi_idx, psi_val, kernel, nlat_out, nlon_out);

    if (polar > 1) {
      at::Tensor xf = x.to(at::kFloat).contiguous();
      comm.all_reduce(xf, pkb::ReduceOp::kSum, resolve(comm, polar_ranks));
      x = xf.to(x.scalar_type());
      x = x.split_with_sizes(split_shapes(x.size(-2), polar), -2)[polar_rank];
    }

    if (az > 1) {
      x = at::cat(transpose(comm, resolve(comm, az_ranks), x, 4, 1, split_shapes(channels, az), az_rank), 1);
    }

    const int64_t B = x.size(0), C = x.size(1), K = x.size(2), H = x.size(3), W = x.size(4);
    x = x.reshape({B, groups, C / groups, K, H, W});
    at::Tensor out =
        at::einsum("bgckxy,gock->bgoxy", {x, weight.reshape({groups, -1, weight.size(1), weight.size(2)})})
            .contiguous();
    out = out.reshape({out.size(0), -1, H, W});
    return {out + bias.reshape({1, -1, 1, 1})};
  }

  // With az, polar, BC = 32·8/az, L = nlat_out/polar, the local
  // (nlat_l, nlon_l) input. NVLink: the azimuth transposes send
  // (az-1)/az of x and of the pre-mixing result Y_local = (32, 8, 3, L,
  // nlon_out/az)·4 B; the polar all-reduce (ring) 2(polar-1)/polar of the
  // full contraction (32, 8/az, 3, nlat_out, nlon_out)·4 B (dominant: W = 8
  // 50 MB). HBM: x read and written by the transposes, the contraction's
  // reads (nnz rows of BC per output longitude) and its output written,
  // the mixing's input read and output written. FLOPs: 2·nnz·BC·nlon_out
  // (contraction) + 2·32·8·8·3·L·(nlon_out/az) (mixing).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& x = in.tensor(0);
    const double nnz = static_cast<double>(in.tensor(2).numel());
    const double kernel = static_cast<double>(in.integer(3)), nlat_out = static_cast<double>(in.integer(4));
    const double nlon_out = static_cast<double>(in.integer(8));
    const double az = static_cast<double>(in.group(10).ranks.size());
    const double polar = static_cast<double>(in.group(11).ranks.size());
    const double batch = static_cast<double>(x.size(0)), chans = static_cast<double>(x.size(1));
    const double out_chans = static_cast<double>(in.tensor(6).size(0));
    const double bc = batch * chans / az;
    const double x_bytes = static_cast<double>(x.nbytes());
    const double full_y = bc * kernel * nlat_out * nlon_out * 4.0;
    const double local_y = batch * chans * kernel * (nlat_out / polar) * (nlon_out / az) * 4.0;
    const double out_bytes = batch * out_chans * (nlat_out / polar) * (nlon_out / az) * 4.0;
    pkb::Cost c;
    c.nvlink_bytes_per_rank =
        (az - 1) / az * (x_bytes + local_y) + (polar > 1 ? 2.0 * (polar - 1) / polar * full_y : 0.0);
    c.hbm_bytes_per_rank = 2.0 * x_bytes + nnz * nlon_out * bc * 4.0 + 2.0 * full_y + local_y + out_bytes;
    c.flops_per_rank = 2.0 * nnz * bc * nlon_out + 2.0 * batch * out_chans * chans * kernel * (nlat_out / polar) *
                                                       (nlon_out / az);
    (void)world;
    return c;
  }

 private:
  // The published _transpose: split `t` along dim0 into the group's chunks,
  // send chunk j to group rank j, receive from each peer j a tensor shaped
  // like this rank's chunk with dim1 = dim1_sizes[j]. One flat
  // all_to_all_single with element splits (the published dist.all_to_all of
  // a list moves the same bytes).
  static std::vector<at::Tensor> transpose(pkb::Collectives& comm, pkb::Group g, const at::Tensor& t, int64_t dim0,
                                           int64_t dim1, const std::vector<int64_t>& dim1_sizes, int64_t me) {
    const int64_t n = static_cast<int64_t>(dim1_sizes.size());
    std::vector<at::Tensor> send = t.split_with_sizes(split_shapes(t.size(dim0), n), dim0);
    std::vector<at::Tensor> flat;
    std::vector<int64_t> send_splits, recv_splits;
    std::vector<std::vector<int64_t>> recv_shapes;
    for (int64_t j = 0; j < n; ++j) {
      flat.push_back(send[j].contiguous().view({-1}));
      send_splits.push_back(send[j].numel());
      std::vector<int64_t> shape = send[me].sizes().vec();
      shape[dim1] = dim1_sizes[j];
      int64_t numel = 1;
      for (int64_t s : shape) numel *= s;
      recv_shapes.push_back(shape);
      recv_splits.push_back(numel);
    }
    int64_t total = 0;
    for (int64_t s : recv_splits) total += s;
    at::Tensor recv = at::empty({total}, t.options());
    comm.all_to_all_single(recv, at::cat(flat), recv_splits, send_splits, g);
    std::vector<at::Tensor> pieces = recv.split_with_sizes(recv_splits, 0);
    for (int64_t j = 0; j < n; ++j) pieces[j] = pieces[j].view(recv_shapes[j]);
    return pieces;
  }

  // Y[b, c, k, l, p] = Σ_{(k, l, λ·nlon_in + ω) in psi} v · x[b, c, λ, (ω + p·pscale) mod nlon_in],
  // p < nlon_out: what the published loop of sparse bmm calls with a roll of
  // x by pscale longitudes between them computes. Here: for a block of
  // output longitudes, gather the shifted input rows of every psi entry,
  // scale them by its value and index_add them into its (k, l) row.
  static at::Tensor contraction(const at::Tensor& x, const at::Tensor& idx, const at::Tensor& val, int64_t kernel,
                                int64_t nlat_out, int64_t nlon_out) {
    const int64_t B = x.size(0), C = x.size(1), nlat_in = x.size(2), nlon_in = x.size(3);
    const int64_t pscale = nlon_in / nlon_out, bc = B * C, nnz = val.numel();
    // (nlat_in·nlon_in, BC): row λ·nlon_in + ω holds x[:, :, λ, ω].
    at::Tensor rows = x.reshape({bc, nlat_in * nlon_in}).t().contiguous();
    at::Tensor lat = at::div(idx[2], nlon_in, "floor"), lon = idx[2].remainder(nlon_in);
    at::Tensor target = idx[0] * nlat_out + idx[1];
    at::Tensor y = at::zeros({kernel * nlat_out, nlon_out, bc}, x.options());
    const int64_t block = std::max<int64_t>(1, std::min<int64_t>(nlon_out, (int64_t{16} << 20) / std::max<int64_t>(1, nnz * bc)));
    for (int64_t p0 = 0; p0 < nlon_out; p0 += block) {
      const int64_t np = std::min(block, nlon_out - p0);
      at::Tensor shift = at::arange(p0, p0 + np, idx.options()) * pscale;
      at::Tensor src = lat.unsqueeze(1) * nlon_in + (lon.unsqueeze(1) + shift.unsqueeze(0)).remainder(nlon_in);
      at::Tensor g = rows.index_select(0, src.reshape({-1})).view({nnz, np, bc}) * val.view({nnz, 1, 1});
      y.narrow(1, p0, np).index_add_(0, target, g);
    }
    // (K·nlat_out, nlon_out, BC) -> (B, C, K, nlat_out, nlon_out)
    return y.view({kernel, nlat_out, nlon_out, bc}).permute({3, 0, 1, 2}).reshape({B, C, kernel, nlat_out, nlon_out});
  }

  // Every rank creates every azimuth group (contiguous), then every polar
  // group (strided), in the published order; groups of one rank are not
  // needed (no collective runs on them) and are skipped on every rank.
  void build_layout(pkb::Collectives& comm, int64_t az) const {
    const int64_t world = comm.world_size(), polar = world / az;
    std::vector<std::vector<int64_t>> layout;
    for (int64_t p = 0; p < polar; ++p) {
      std::vector<int64_t> r;
      for (int64_t a = 0; a < az; ++a) r.push_back(p * az + a);
      layout.push_back(r);
    }
    for (int64_t a = 0; a < az; ++a) {
      std::vector<int64_t> r;
      for (int64_t p = 0; p < polar; ++p) r.push_back(p * az + a);
      layout.push_back(r);
    }
    for (const auto& ranks : layout) {
      if (ranks.size() < 2 || static_cast<int64_t>(ranks.size()) == world) continue;
      auto key = std::make_pair(&comm, ranks);
      if (groups_.count(key) == 0) groups_.emplace(key, comm.new_group(ranks));
    }
  }

  pkb::Group resolve(pkb::Collectives& comm, const std::vector<int64_t>& ranks) const {
    if (static_cast<int64_t>(ranks.size()) == comm.world_size()) return pkb::kWorld;
    auto it = groups_.find(std::make_pair(&comm, ranks));
    PKB_CHECK(it != groups_.end(), "process group argument is not part of the azimuth x polar layout");
    return it->second;
  }

  mutable std::map<std::pair<const pkb::Collectives*, std::vector<int64_t>>, pkb::Group> groups_;
};

// NOTE [memory admission]. Measured on CPU at 128x128 (the largest rank's
// VmHWM, reference run, one trial): 2.70 GiB at W=2 timed, 0.85 GiB untimed,
// 0.77 GiB at W=4 untimed; the timing's input groups (NOTE [timing protocol]:
// up to 3x the last-level cache per side, 320 MiB there) make most of it.
// Declared: 3 GiB per rank on CPU up to the measured 128x128 (larger:
// unknown); unknown (0) on a GPU.
int64_t memory_estimate(int world, int64_t m, int64_t n, bool cuda) {
  return cuda || m * n > 128 * 128 ? 0 : int64_t{3} << 30;
}

}  // namespace

PKB_MEMORY_ESTIMATE(memory_estimate)
PKB_PROBLEM(TorchharmonicsSphericalConvolution)
