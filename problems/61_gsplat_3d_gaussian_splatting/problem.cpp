// gsplat's distributed 3-D Gaussian-splatting projection (the pure-PyTorch
// `_torch_impl` path): all-gather the cameras, project every local Gaussian
// into every camera, pack the visible (camera, Gaussian) pairs and
// all-to-all them to the rank that owns the camera. Every elementwise op is
// bf16 with a rounding after each op and the einsums are bf16 GEMMs, in the
// published order: the integer radii are ceilings of bf16 expressions, so a
// change of op order or precision flips some of them (catalog §0.4).
#include "../blocks/host_list.h"
#include "pkb/integrity.h"
#include "pkb/problem.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace {

const pkb::ProblemSpec kSpec{61, "gsplat_3d_gaussian_splatting",
                             "Distributed 3-D Gaussian-splatting projection: all-gather cameras, project local "
                             "Gaussians to every camera, all-to-all the visible (packed) Gaussians to the camera's "
                             "owner rank",
                             "Geometric/Spatial", "gsplat (distributed rasterization path, _torch_impl projection)",
                             "any"};

class GsplatProjection : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published (seed(61, r, trial), all bf16 regardless of the
  // harness dtype): means columns 0, 1, 2, quats, scales, opacities, colors.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const int64_t n = std::max<int64_t>(1000, std::min<int64_t>(req.m, 10000));
    const int64_t width = std::max<int64_t>(64, std::min<int64_t>(req.n, 512));
    const int64_t height = std::max<int64_t>(64, std::min<int64_t>(req.m, 512));
    auto bf = req.options(at::kBFloat16);
    at::Tensor means = at::empty({n, 3}, bf);
    means.select(1, 0).copy_((at::rand({n}, bf) - 0.5) * 1.5);
    means.select(1, 1).copy_((at::rand({n}, bf) - 0.5) * 1.5);
    means.select(1, 2).copy_(at::rand({n}, bf) * 2.0 + 2.0);
    at::Tensor quats = at::randn({n, 4}, bf);
    at::Tensor scales = at::rand({n, 3}, bf) * 0.02;
    at::Tensor opacities = at::rand({n}, bf) * 0.8 + 0.1;
    at::Tensor colors = at::rand({n, 3}, bf);
    at::Tensor viewmats = at::eye(4, bf).reshape({1, 4, 4}).contiguous();
    at::Tensor ks = at::eye(3, bf).reshape({1, 3, 3}).contiguous();
    const double focal = 0.8 * static_cast<double>(std::min(width, height));
    ks.select(1, 0).select(1, 0).fill_(focal);
    ks.select(1, 1).select(1, 1).fill_(focal);
    ks.select(1, 0).select(1, 2).fill_(static_cast<double>(width) * 0.5);
    ks.select(1, 1).select(1, 2).fill_(static_cast<double>(height) * 0.5);
    return {{"means", means}, {"quats", quats}, {"scales", scales}, {"opacities", opacities}, {"colors", colors},
            {"viewmats", viewmats}, {"Ks", ks}, {"image_width", width}, {"image_height", height}, {"eps2d", 0.3},
            {"near_plane", 0.01}, {"far_plane", 1e10}, {"camera_model", std::string("pinhole")}};
  }

  // NOTE [integrity trials] (pkb/integrity.h): with the published identity
  // camera on every rank, every Gaussian is visible in every camera and the
  // cameras are alike, so the packing never drops a pair and much of the
  // output is the same whatever the camera. Here each rank's camera (its own
  // seed) is turned about the y axis by up to ±0.3 rad and moved by up to
  // ±0.8 in x and y and ±0.5 in z, with a focal length of 0.6–1.0 × min(W, H)
  // and the principal point up to ±10 % off centre, so a varying share of the
  // Gaussians falls outside each image and is dropped, and every rank's
  // projections differ. The Gaussians are the published draw. camera_ids stay
  // all 0: each rank owns one camera, as published, and the ids are local.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = make_inputs(req);
    const int64_t width = in.integer(7), height = in.integer(8);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    at::Tensor u = at::rand({8}, f64);  // after the Gaussians: the same Gaussians as make_inputs
    auto pick = [&](int i, double lo, double hi) { return lo + (hi - lo) * u[i].item<double>(); };
    const double angle = pick(0, -0.3, 0.3);
    at::Tensor view = at::eye(4, f64);
    view[0][0] = std::cos(angle);
    view[0][2] = std::sin(angle);
    view[2][0] = -std::sin(angle);
    view[2][2] = std::cos(angle);
    view[0][3] = pick(1, -0.8, 0.8);
    view[1][3] = pick(2, -0.8, 0.8);
    view[2][3] = pick(3, -0.5, 0.5);
    const double focal = pick(4, 0.6, 1.0) * static_cast<double>(std::min(width, height));
    at::Tensor k = at::eye(3, f64);
    k[0][0] = focal;
    k[1][1] = pick(5, 0.9, 1.1) * focal;
    k[0][2] = pick(6, 0.4, 0.6) * static_cast<double>(width);
    k[1][2] = pick(7, 0.4, 0.6) * static_cast<double>(height);
    const at::Tensor& published_view = in.tensor(5);
    in.args()[5].value = view.reshape({1, 4, 4}).to(published_view.options()).contiguous();
    in.args()[6].value = k.reshape({1, 3, 3}).to(in.tensor(6).options()).contiguous();
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& means = in.tensor(0);
    const at::Tensor& quats = in.tensor(1);
    const at::Tensor& scales = in.tensor(2);
    at::Tensor opacities = in.tensor(3);
    at::Tensor colors = in.tensor(4);
    at::Tensor viewmats = in.tensor(5);
    at::Tensor ks = in.tensor(6);
    const int64_t width = in.integer(7), height = in.integer(8);
    const double eps2d = in.real(9), near_plane = in.real(10), far_plane = in.real(11);
    PKB_CHECK(in.str(12) == "pinhole", "only the pinhole camera model is supported");
    const int world = comm.world_size();
    const int64_t n = means.size(0), c_local = viewmats.size(0);

    // N_world: all-gather of the int32 Gaussian count.
    std::vector<int64_t> n_world{n};
    if (world > 1) {
      at::Tensor mine = at::full({}, n, means.options().dtype(at::kInt));
      at::Tensor all = at::empty({world}, mine.options());
      comm.all_gather_into_tensor(all, mine);
      at::Tensor host = all.to(at::kCPU);
      n_world.assign(host.data_ptr<int32_t>(), host.data_ptr<int32_t>() + world);
    }
    const std::vector<int64_t> c_world(world, c_local);

    // Cameras: [viewmat | K] packed as (C, 25) rows, all-gathered, split back.
    if (world > 1) {
      at::Tensor data = at::cat({viewmats.reshape({c_local, -1}), ks.reshape({c_local, -1})}, -1);
      at::Tensor gathered = at::empty({world, c_local, data.size(1)}, data.options());
      comm.all_gather_into_tensor(gathered, data.contiguous());
      at::Tensor collected = gathered.reshape({world * c_local, data.size(1)});
      std::vector<at::Tensor> parts = at::split_with_sizes(collected, {16, 9}, -1);
      viewmats = parts[0].view({-1, 4, 4});
      ks = parts[1].view({-1, 3, 3});
    }
    const int64_t cams = viewmats.size(0);

    at::Tensor covars = quat_scale_to_covar(quats, scales);
    at::Tensor radii, means2d, depths, conics;
    fully_fused_projection(means, covars, viewmats, ks, width, height, eps2d, near_plane, far_plane, radii, means2d,
                           depths, conics);

    // Pack the (camera, Gaussian) pairs with both radii > 0, row-major.
    at::Tensor valid = (radii > 0).all(-1);
    std::vector<at::Tensor> where = at::where(valid);
    at::Tensor camera_ids = where[0].to(at::kInt), gaussian_ids = where[1].to(at::kInt);
    radii = radii.index({valid});
    means2d = means2d.index({valid});
    depths = depths.index({valid});
    conics = conics.index({valid});
    opacities = opacities.index({gaussian_ids.to(at::kLong)});
    colors = colors.index({gaussian_ids.to(at::kLong)});

    // Counts per destination rank (camera d belongs to rank d // C).
    at::Tensor cnts_all = at::bincount(camera_ids.to(at::kLong), {}, cams);
    std::vector<at::Tensor> cnts;
    for (const at::Tensor& part : at::split_with_sizes(cnts_all, c_world, 0)) cnts.push_back(part.sum());
    at::Tensor send_counts = at::stack(cnts);  // (W,) int64
    at::Tensor recv_counts = send_counts;
    if (world > 1) {
      recv_counts = at::empty_like(send_counts);
      comm.all_to_all_single(recv_counts, send_counts);
    }
    const std::vector<int64_t> in_splits = pkb::blocks::host_list(send_counts), out_splits = pkb::blocks::host_list(recv_counts);

    radii = all_to_all_list(comm, world, {radii}, in_splits, out_splits)[0];
    std::vector<at::Tensor> attrs =
        all_to_all_list(comm, world, {means2d, depths, conics, opacities, colors}, in_splits, out_splits);

    // Offsets from an integer cumsum (int64), repeated per destination: the
    // quirk is that gaussian_ids get the offset of the *receiving* rank.
    auto offsets_for = [&](const std::vector<int64_t>& per_rank, const at::Tensor& ids) {
      std::vector<int64_t> lead{0};
      lead.insert(lead.end(), per_rank.begin(), per_rank.end() - 1);
      at::Tensor t = at::tensor(lead, ids.options().dtype(at::kLong)).to(ids.scalar_type());
      return at::cumsum(t, 0).repeat_interleave(send_counts);
    };
    camera_ids = camera_ids - offsets_for(c_world, camera_ids);
    gaussian_ids = gaussian_ids + offsets_for(n_world, gaussian_ids);
    std::vector<at::Tensor> ids = all_to_all_list(comm, world, {camera_ids, gaussian_ids}, in_splits, out_splits);

    return {ids[0].contiguous(),   ids[1].contiguous(),   radii.contiguous(),    attrs[0].contiguous(),
            attrs[1].contiguous(), attrs[2].contiguous(), attrs[3].contiguous(), attrs[4].contiguous()};
  }

  // Per rank, n local Gaussians, C = W cameras (one per rank), all visible
  // with these inputs (the upper bound):
  //   NVLink: every packed entry sent to another rank carries 2·4 (radii,
  //           int32) + 10·2 (bf16 attributes) + 2·8 (int64 ids) = 44 bytes:
  //           (W-1)·n·44, plus the (1, 25) bf16 camera all-gather and the
  //           counts;
  //   HBM:    the inputs (14 bf16 per Gaussian) read, and about 100 bf16
  //           intermediates per (camera, Gaussian) pair written and read:
  //           n·14·2 + W·n·200·2;
  //   FLOPs:  about 200 per Gaussian per camera (covariance, projection,
  //           the 2x3·3x3·3x2 product, conics, radii): W·n·200.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const double n = static_cast<double>(in.tensor(0).size(0)), w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) * n * 44.0 + (w - 1) * 25.0 * 2.0 + (w - 1) * 8.0 * 2.0,
            /*hbm_bytes_per_rank=*/n * 14.0 * 2.0 + w * n * 200.0 * 2.0,
            /*flops_per_rank=*/w * n * 200.0};
  }

 private:
  // _all_to_all_tensor_list: the tensors (same leading length K) packed side
  // by side as one (K, Σ cols) block, exchanged with the given row splits,
  // split back into views of their trailing shapes. Identity at W = 1.
  static std::vector<at::Tensor> all_to_all_list(pkb::Collectives& comm, int world,
                                                 const std::vector<at::Tensor>& list,
                                                 const std::vector<int64_t>& in_splits,
                                                 const std::vector<int64_t>& out_splits) {
    if (world == 1) return list;
    const int64_t k = list[0].size(0);
    std::vector<at::Tensor> flat;
    std::vector<int64_t> sizes;
    for (const auto& t : list) {
      int64_t cols = 1;
      for (int64_t d = 1; d < t.dim(); ++d) cols *= t.size(d);
      flat.push_back(t.reshape({k, cols}));
      sizes.push_back(cols);
    }
    at::Tensor data = at::cat(flat, -1).contiguous();
    const int64_t total = std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0});
    at::Tensor collected = at::empty({total, data.size(1)}, data.options());
    comm.all_to_all_single(collected, data, out_splits, in_splits);
    std::vector<at::Tensor> parts = at::split_with_sizes(collected, sizes, -1);
    std::vector<at::Tensor> out;
    for (size_t i = 0; i < list.size(); ++i) {
      std::vector<int64_t> shape{-1};
      for (int64_t d = 1; d < list[i].dim(); ++d) shape.push_back(list[i].size(d));
      out.push_back(parts[i].view(shape));
    }
    return out;
  }

  // _quat_to_rotmat then M = R·diag(s), Σ = M·Mᵀ (bf16 einsum).
  static at::Tensor quat_scale_to_covar(const at::Tensor& quats_in, const at::Tensor& scales) {
    at::Tensor norm = at::linalg_vector_norm(quats_in, 2, {-1}, /*keepdim=*/true).clamp_min(1e-12);
    at::Tensor quats = quats_in / norm.expand_as(quats_in);
    std::vector<at::Tensor> q = quats.unbind(-1);
    const at::Tensor &w = q[0], &x = q[1], &y = q[2], &z = q[3];
    at::Tensor r = at::stack(
        {
            1 - 2 * (y.pow(2) + z.pow(2)),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x.pow(2) + z.pow(2)),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x.pow(2) + y.pow(2)),
        },
        -1);
    std::vector<int64_t> shape(quats.sizes().begin(), quats.sizes().end() - 1);
    shape.push_back(3);
    shape.push_back(3);
    r = r.reshape(shape);
    at::Tensor m = r * scales.unsqueeze(-2);
    return at::einsum("...ij,...kj -> ...ik", {m, m});
  }

  static void fully_fused_projection(const at::Tensor& means, const at::Tensor& covars, const at::Tensor& viewmats,
                                     const at::Tensor& ks, int64_t width, int64_t height, double eps2d,
                                     double near_plane, double far_plane, at::Tensor& radii, at::Tensor& means2d,
                                     at::Tensor& depths, at::Tensor& conics) {
    using at::indexing::Slice;
    // _world_to_cam
    at::Tensor rot = viewmats.index({"...", Slice(0, 3), Slice(0, 3)});
    at::Tensor t = viewmats.index({"...", Slice(0, 3), 3});
    at::Tensor means_c = at::einsum("...cij,...nj->...cni", {rot, means}) + t.unsqueeze(-2);
    at::Tensor covars_c = at::einsum("...cij,...njk,...clk->...cnil", {rot, covars, rot});

    // _persp_proj
    std::vector<at::Tensor> txyz = means_c.unbind(-1);
    at::Tensor tx = txyz[0], ty = txyz[1], tz = txyz[2];
    at::Tensor tz2 = tz.pow(2);
    at::Tensor fx = ks.index({"...", 0, 0, at::indexing::None});
    at::Tensor fy = ks.index({"...", 1, 1, at::indexing::None});
    at::Tensor cx = ks.index({"...", 0, 2, at::indexing::None});
    at::Tensor cy = ks.index({"...", 1, 2, at::indexing::None});
    // Python's `scalar / tensor` is tensor.reciprocal() * scalar.
    at::Tensor tan_fovx = fx.reciprocal() * (0.5 * static_cast<double>(width));
    at::Tensor tan_fovy = fy.reciprocal() * (0.5 * static_cast<double>(height));
    at::Tensor lim_x_pos = at::rsub(cx, static_cast<double>(width)) / fx + 0.3 * tan_fovx;
    at::Tensor lim_x_neg = cx / fx + 0.3 * tan_fovx;
    at::Tensor lim_y_pos = at::rsub(cy, static_cast<double>(height)) / fy + 0.3 * tan_fovy;
    at::Tensor lim_y_neg = cy / fy + 0.3 * tan_fovy;
    tx = tz * at::clamp(tx / tz, -lim_x_neg, lim_x_pos);
    ty = tz * at::clamp(ty / tz, -lim_y_neg, lim_y_pos);
    at::Tensor o = at::zeros(tz.sizes(), means.options());
    std::vector<int64_t> jshape(tz.sizes().begin(), tz.sizes().end());
    jshape.push_back(2);
    jshape.push_back(3);
    at::Tensor jac = at::stack({fx / tz, o, -fx * tx / tz2, o, fy / tz, -fy * ty / tz2}, -1).reshape(jshape);
    at::Tensor cov2d = at::einsum("...ij,...jk,...kl->...il", {jac, covars_c, jac.transpose(-1, -2)});
    means2d = at::einsum("...ij,...nj->...ni", {ks.index({"...", Slice(0, 2), Slice(0, 3)}), means_c});
    means2d = means2d / tz.unsqueeze(-1);

    // _fully_fused_projection (det_orig and compensations are not computed:
    // calc_compensations is False and they have no other effect).
    cov2d = cov2d + at::eye(2, means.options()) * eps2d;
    at::Tensor c00 = cov2d.index({"...", 0, 0}), c01 = cov2d.index({"...", 0, 1});
    at::Tensor c10 = cov2d.index({"...", 1, 0}), c11 = cov2d.index({"...", 1, 1});
    at::Tensor det = (c00 * c11 - c01 * c10).clamp_min(1e-10);
    conics = at::stack({c11 / det, -(c01 + c10) / 2.0 / det, c00 / det}, -1);
    depths = means_c.index({"...", 2});
    at::Tensor radius_x = at::ceil(3.33 * at::sqrt(c00));
    at::Tensor radius_y = at::ceil(3.33 * at::sqrt(c11));
    at::Tensor radius = at::stack({radius_x, radius_y}, -1);
    at::Tensor valid = (depths > near_plane) & (depths < far_plane);
    radius.index_put_({~valid}, 0.0);
    at::Tensor m0 = means2d.index({"...", 0}), m1 = means2d.index({"...", 1});
    at::Tensor r0 = radius.index({"...", 0}), r1 = radius.index({"...", 1});
    at::Tensor inside = (m0 + r0 > 0) & (m0 - r0 < width) & (m1 + r1 > 0) & (m1 - r1 < height);
    radius.index_put_({~inside}, 0.0);
    radii = radius.to(at::kInt);
  }
};

}  // namespace

PKB_PROBLEM(GsplatProjection)
