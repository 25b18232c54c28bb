// MAGI-1 tile-parallel VAE decode (catalog §78): a latent video is cut into
// overlapping tiles, dealt out round-robin by size, each rank "decodes" its
// tiles (a trilinear upsample stand-in for the VAE decoder), all decoded tiles
// are all-gathered, every rank blends its tiles with the unblended
// neighbours above and to the left (bf16, rounding after every op, as
// published), the blended tiles are all-gathered again and stitched.
// The published variable all-gather is an all_to_all_single of W copies of the
// local tiles with per-rank output splits, after an all_gather_object of the
// tile shapes; the shapes depend only on z's shape (the same on every rank), so
// the port computes them locally and keeps the all-to-all.
#include "pkb/memory_estimate.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{78, "magi1_tile_parallel_vae_decode",
                             "Tile-parallel VAE decode: tiles dealt by size, decoded, all-gathered, blended, stitched",
                             "Geometric/Spatial", "MAGI-1 (SandAI) tile-parallel VAE decode", "any"};

struct Layout {
  int64_t tile_t, tile_h, tile_w;        // latent tile extents
  int64_t stride_t, stride_h, stride_w;
  int64_t up_s, up_t;                    // spatial / temporal upsample
  int64_t blend_t, blend_h, blend_w;
  int64_t keep_t, keep_h, keep_w;
  int64_t tiles_t, tiles_h, tiles_w;
  int64_t total() const { return tiles_t * tiles_h * tiles_w; }
  int64_t index(int64_t t, int64_t h, int64_t w) const { return (t * tiles_h + h) * tiles_w + w; }
  void undot(int64_t i, int64_t* t, int64_t* h, int64_t* w) const {
    *w = i % tiles_w;
    *h = i / tiles_w % tiles_h;
    *t = i / (tiles_w * tiles_h);
  }
};

Layout make_layout(const at::Tensor& z, const pkb::Inputs& in) {
  Layout l;
  const bool first_frame_as_image = in.boolean(9);
  l.tile_t = in.integer(1) + (first_frame_as_image ? 1 : 0);
  l.tile_h = in.integer(2);
  l.tile_w = in.integer(3);
  const double sp = in.real(4), tp = in.real(5);
  l.up_s = in.integer(6) * in.integer(8);
  l.up_t = in.integer(7);
  l.stride_h = static_cast<int64_t>(static_cast<double>(l.tile_h) * (1.0 - sp));
  l.stride_w = static_cast<int64_t>(static_cast<double>(l.tile_w) * (1.0 - sp));
  l.stride_t = static_cast<int64_t>(static_cast<double>(l.tile_t) * (1.0 - tp));
  PKB_CHECK(std::min({l.stride_t, l.stride_h, l.stride_w}) > 0, "tile overlap factors must leave a positive stride");
  const int64_t real_t = l.tile_t * l.up_t, real_h = l.tile_h * l.up_s, real_w = l.tile_w * l.up_s;
  l.blend_t = static_cast<int64_t>(static_cast<double>(real_t) * tp);
  l.blend_h = static_cast<int64_t>(static_cast<double>(real_h) * sp);
  l.blend_w = static_cast<int64_t>(static_cast<double>(real_w) * sp);
  l.keep_t = real_t - l.blend_t;
  l.keep_h = real_h - l.blend_h;
  l.keep_w = real_w - l.blend_w;
  l.tiles_t = (z.size(2) + l.stride_t - 1) / l.stride_t;
  l.tiles_h = (z.size(3) + l.stride_h - 1) / l.stride_h;
  l.tiles_w = (z.size(4) + l.stride_w - 1) / l.stride_w;
  return l;
}

at::Tensor decode_tile(const at::Tensor& tile, const Layout& l) {
  std::vector<double> scales{static_cast<double>(l.up_t), static_cast<double>(l.up_s), static_cast<double>(l.up_s)};
  at::Tensor d = at::upsample_trilinear3d(tile.to(at::kFloat), std::nullopt, /*align_corners=*/false,
                                          at::ArrayRef<double>(scales));
  if (d.size(1) < 3) {
    const int64_t rep = (3 + d.size(1) - 1) / d.size(1);
    d = d.repeat({1, rep, 1, 1, 1});
  }
  return d.slice(1, 0, 3).to(at::kBFloat16);
}

// cur[..., i, ...] = prev[..., -e+i, ...] * (1 - i/e) + cur[..., i, ...] * (i/e) along `dim`, bf16 per op.
at::Tensor blend(const at::Tensor& prev, at::Tensor cur, int64_t extent, int64_t dim) {
  extent = std::min({prev.size(dim), cur.size(dim), extent});
  for (int64_t i = 0; i < extent; ++i) {
    const double ratio = static_cast<double>(i) / static_cast<double>(extent);
    cur.select(dim, i).copy_(prev.select(dim, prev.size(dim) - extent + i) * (1.0 - ratio) + cur.select(dim, i) * ratio);
  }
  return cur;
}

class Magi1TileParallelVaeDecode : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Fixed shapes. z is always bf16 (whatever the harness dtype), per rank.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto bf = req.options(at::kBFloat16);
    return {{"z", at::randn({1, 16, 6, 90, 90}, bf)}, {"tile_latent_min_length", int64_t{3}},
            {"tile_latent_min_height", int64_t{32}}, {"tile_latent_min_width", int64_t{32}},
            {"spatial_tile_overlap_factor", 0.25}, {"temporal_tile_overlap_factor", 0.0},
            {"spatial_upsample", int64_t{8}}, {"temporal_upsample", int64_t{4}}, {"sr_ratio", int64_t{1}},
            {"first_frame_as_image", false}, {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& z = in.tensor(0);
    const Layout l = make_layout(z, in);
    const int64_t total = l.total();
    const int world = comm.world_size(), rank = comm.rank();

    std::vector<at::Tensor> latent(total);
    std::vector<int64_t> numel(total);
    for (int64_t i = 0; i < total; ++i) {
      int64_t t, h, w;
      l.undot(i, &t, &h, &w);
      latent[i] = z.slice(2, t * l.stride_t, t * l.stride_t + l.tile_t)
                      .slice(3, h * l.stride_h, h * l.stride_h + l.tile_h)
                      .slice(4, w * l.stride_w, w * l.stride_w + l.tile_w);
      numel[i] = latent[i].numel();
    }
    // Deal out by size, descending, ties by ascending index (Python's stable sort).
    std::vector<int64_t> sorted(total);
    for (int64_t i = 0; i < total; ++i) sorted[i] = i;
    std::stable_sort(sorted.begin(), sorted.end(), [&](int64_t a, int64_t b) { return numel[a] > numel[b]; });
    std::vector<std::vector<int64_t>> per_rank(world);
    for (int64_t j = 0; j < total; ++j) per_rank[j % world].push_back(sorted[j]);
    const std::vector<int64_t>& mine = per_rank[rank];

    std::vector<at::Tensor> decoded;
    for (int64_t i : mine) decoded.push_back(decode_tile(latent[i], l));
    // Shapes of a decoded tile (what the published all_gather_object exchanges).
    auto decoded_shape = [&](int64_t i) {
      return std::vector<int64_t>{1, 3, latent[i].size(2) * l.up_t, latent[i].size(3) * l.up_s,
                                  latent[i].size(4) * l.up_s};
    };
    auto cropped_shape = [&](int64_t i) {
      std::vector<int64_t> s = decoded_shape(i);
      s[2] = std::min(s[2], l.keep_t);
      s[3] = std::min(s[3], l.keep_h);
      s[4] = std::min(s[4], l.keep_w);
      return s;
    };
    std::vector<at::Tensor> decoded_all = gather_tiles(comm, decoded, per_rank, decoded_shape, total, z.device());

    std::vector<at::Tensor> blended;
    for (int64_t i : mine) {
      int64_t t, h, w;
      l.undot(i, &t, &h, &w);
      at::Tensor tile = decoded_all[i].clone();
      if (t > 0) tile = blend(decoded_all[l.index(t - 1, h, w)], tile, l.blend_t, 2);
      if (h > 0) tile = blend(decoded_all[l.index(t, h - 1, w)], tile, l.blend_h, 3);
      if (w > 0) tile = blend(decoded_all[l.index(t, h, w - 1)], tile, l.blend_w, 4);
      blended.push_back(tile.slice(2, 0, l.keep_t).slice(3, 0, l.keep_h).slice(4, 0, l.keep_w).contiguous());
    }
    std::vector<at::Tensor> blended_all = gather_tiles(comm, blended, per_rank, cropped_shape, total, z.device());

    std::vector<at::Tensor> frames;
    for (int64_t t = 0; t < l.tiles_t; ++t) {
      std::vector<at::Tensor> rows;
      for (int64_t h = 0; h < l.tiles_h; ++h) {
        std::vector<at::Tensor> row;
        for (int64_t w = 0; w < l.tiles_w; ++w) row.push_back(blended_all[l.index(t, h, w)]);
        rows.push_back(at::cat(row, 4));
      }
      frames.push_back(at::cat(rows, 3));
    }
    return {at::cat(frames, 2)};
  }

  // NVLink: each rank receives every other rank's decoded tiles (the first
  // gather) and blended tiles (the second); per rank that is the whole set
  // less its own share: ~(W-1)/W of (decoded + blended) bf16 bytes. The
  // published all-to-all of W copies sends the local share W-1 times.
  // HBM: z read, the 3-channel decoded and blended tiles written and read,
  // the stitched output written. FLOPs: ~8 per interpolated voxel of the 3
  // kept channels (a fused decoder interpolates only those) plus 3 per
  // blended element.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& z = in.tensor(0);
    const Layout l = make_layout(z, in);
    double decoded = 0, blended = 0;
    for (int64_t i = 0; i < l.total(); ++i) {
      int64_t t, h, w;
      l.undot(i, &t, &h, &w);
      const double tt = static_cast<double>(std::min(l.tile_t, z.size(2) - t * l.stride_t) * l.up_t);
      const double hh = static_cast<double>(std::min(l.tile_h, z.size(3) - h * l.stride_h) * l.up_s);
      const double ww = static_cast<double>(std::min(l.tile_w, z.size(4) - w * l.stride_w) * l.up_s);
      decoded += 3.0 * tt * hh * ww;
      blended += 3.0 * std::min(tt, static_cast<double>(l.keep_t)) * std::min(hh, static_cast<double>(l.keep_h)) *
                 std::min(ww, static_cast<double>(l.keep_w));
    }
    const double wd = world, e = 2.0;
    return {
        /*nvlink_bytes_per_rank=*/(wd - 1) / wd * (decoded + blended) * e,
        /*hbm_bytes_per_rank=*/static_cast<double>(z.nbytes()) + (2.0 * decoded + 2.0 * blended) * e / wd + blended * e,
        /*flops_per_rank=*/(8.0 * decoded + 3.0 * decoded) / wd};
  }

 private:
  // Variable all-gather as published: send W copies of the flat local tiles,
  // receive each rank's share (its tiles' sizes, in its dealing order).
  template <typename ShapeFn>
  static std::vector<at::Tensor> gather_tiles(pkb::Collectives& comm, const std::vector<at::Tensor>& tiles,
                                              const std::vector<std::vector<int64_t>>& per_rank, ShapeFn shape_of,
                                              int64_t total, at::Device dev) {
    const int world = comm.world_size();
    std::vector<at::Tensor> flat;
    for (const auto& t : tiles) flat.push_back(t.reshape({-1}));
    auto bf = at::TensorOptions().dtype(at::kBFloat16).device(dev);
    at::Tensor local = flat.empty() ? at::empty({0}, bf) : at::cat(flat, 0);
    std::vector<int64_t> rank_sizes(world, 0);
    for (int r = 0; r < world; ++r)
      for (int64_t i : per_rank[r]) {
        int64_t n = 1;
        for (int64_t s : shape_of(i)) n *= s;
        rank_sizes[r] += n;
      }
    PKB_CHECK(local.numel() == rank_sizes[comm.rank()], "local tiles disagree with the computed tile shapes");
    at::Tensor send = local.repeat({world});
    int64_t recv_total = 0;
    for (int64_t s : rank_sizes) recv_total += s;
    at::Tensor recv = at::empty({recv_total}, bf);
    comm.all_to_all_single(recv, send, rank_sizes, std::vector<int64_t>(world, local.numel()));
    std::vector<at::Tensor> by_index(total);
    int64_t off = 0;
    for (int r = 0; r < world; ++r)
      for (int64_t i : per_rank[r]) {
        std::vector<int64_t> s = shape_of(i);
        int64_t n = 1;
        for (int64_t d : s) n *= d;
        by_index[i] = recv.slice(0, off, off + n).view(s);
        off += n;
      }
    return by_index;
  }
};

// NOTE [memory admission]: fixed shapes. Measured on CPU (the largest rank's
// VmHWM, reference run, one trial, untimed): 1.92 GiB at W=2; the timing's
// input groups add at most 2 x 128 copies of the 1.5 MB latent. Declared:
// 2.5 GiB per rank on CPU; unknown (0) on a GPU.
int64_t memory_estimate(int world, int64_t m, int64_t n, bool cuda) {
  return cuda ? 0 : int64_t{5} << 29;
}

}  // namespace

PKB_MEMORY_ESTIMATE(memory_estimate)
PKB_PROBLEM(Magi1TileParallelVaeDecode)
