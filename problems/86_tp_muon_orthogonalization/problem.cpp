// Newton-Schulz (Muon) orthogonalisation of a column-sharded matrix: the
// Frobenius norm and every step's Gram matrix X·Xᵀ are all-reduced; the
// polynomial update is applied to the local columns. float32 throughout
// (fp32 GEMMs, no TF32), one rounding to the input dtype at the end.
#include "pkb/problem.h"

#include <array>
#include <map>
#include <vector>

namespace {

const pkb::ProblemSpec kSpec{86, "tp_muon_orthogonalization",
                             "Newton-Schulz (Muon) orthogonalisation of a column-sharded matrix", "Tensor Parallel",
                             "NVIDIA Emerging-Optimizers / Megatron Muon tensor-parallel Newton-Schulz (inferred)",
                             "any"};

using Coeffs = std::vector<std::array<double, 3>>;

const Coeffs& coefficients(const std::string& type) {
  static const std::map<std::string, Coeffs> table{
      {"simple", {{3.4445, -4.7750, 2.0315}}},
      {"quintic",
       {{4.0848, -6.8946, 2.9270},
        {3.9505, -6.3029, 2.6377},
        {3.7418, -5.5913, 2.3037},
        {2.8769, -3.1427, 1.2046},
        {2.8366, -3.0525, 1.2012}}},
      {"polar_express",
       {{8.2051, -22.9019, 16.4607},
        {4.0664, -2.8612, 0.5184},
        {3.9096, -2.8234, 0.5250},
        {3.2856, -2.4647, 0.5074},
        {2.2779, -1.6447, 0.4162},
        {1.8726, -1.2307, 0.3585},
        {1.8564, -1.2132, 0.3568},
        {1.8750, -1.2500, 0.3750}}},
      {"aol",
       {{4.0098, -7.0585, 2.4635},
        {3.4585, -5.5479, 2.5959},
        {2.7573, -3.2939, 1.4254},
        {2.7215, -3.0494, 1.3169}}},
  };
  auto it = table.find(type);
  PKB_CHECK(it != table.end(), "unknown coefficient_type '", type, "'");
  return it->second;
}

constexpr int64_t kRows = 512;

class TpMuonOrthogonalization : public pkb::ProblemWithSpec<kSpec> {
 public:
  // x: (512, Cg/W) bf16 (always bf16, as published), randn + 0.01·rank
  // (rounded to bf16); Cg = roundup(512, W), or roundup(1024, W) if N >= 4096.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    int64_t global_cols = req.n < 4096 ? 512 : 1024;
    global_cols = (global_cols + req.world - 1) / req.world * req.world;
    const int64_t local_cols = global_cols / req.world;
    at::Tensor x = at::randn({kRows, local_cols}, req.options(at::kBFloat16));
    x = x + 0.01 * req.rank;
    return {{"x", x.contiguous()}, {"steps", int64_t{5}}, {"coefficient_type", std::string("quintic")},
            {"partition_dim", int64_t{1}}, {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& x = in.tensor(0);
    const int64_t steps = in.integer(1);
    const Coeffs& coeffs = coefficients(in.str(2));
    const int64_t partition_dim = in.integer(3);
    PKB_CHECK(x.dim() == 2, "x must be 2-D");
    PKB_CHECK(steps % static_cast<int64_t>(coeffs.size()) == 0, "steps must be a multiple of ",
              coeffs.size());
    PKB_CHECK(partition_dim == 0 || partition_dim == 1, "invalid partition_dim");
    at::Tensor work = partition_dim == 0 ? x.mT().contiguous() : x;
    work = work.to(at::kFloat);
    at::Tensor norm_sq = (work * work).sum();
    comm.all_reduce(norm_sq);
    work = work / at::sqrt(norm_sq).clamp_min(1e-7);
    for (int64_t step = 0; step < steps; ++step) {
      const auto& abc = coeffs[step % coeffs.size()];
      at::Tensor gram = at::matmul(work, work.mT());
      comm.all_reduce(gram);
      at::Tensor update = at::addmm(gram, gram, gram, /*beta=*/abc[1], /*alpha=*/abc[2]);
      work = at::addmm(work, update, work, /*beta=*/abc[0], /*alpha=*/1.0);
    }
    work = work.to(x.scalar_type());
    if (partition_dim == 0) return {work.mT().contiguous()};
    return {work.contiguous()};
  }

  // R = rows, C = local columns, s = steps. NVLink: one scalar and s R×R
  // float32 all-reduces, 2(W-1)/W of each. HBM: x read and the result
  // written, plus per step X read twice and written, G written, read twice
  // (G·G and the update) and U written and read: 3·4RC + 5·4R².
  // FLOPs: 2RC for the norm, per step 2R²C (Gram) + 2R³ (G·G, replicated on
  // every rank) + 2R²C (U·X) and the axpys (≈ 2R² + 2RC).
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& x = in.tensor(0);
    const int64_t pd = in.integer(3);
    const double r = static_cast<double>(pd == 0 ? x.size(1) : x.size(0));
    const double c = static_cast<double>(pd == 0 ? x.size(0) : x.size(1));
    const double s = static_cast<double>(in.integer(1)), w = world, e = static_cast<double>(x.element_size());
    return {/*nvlink_bytes_per_rank=*/2.0 * (w - 1) / w * (4.0 + s * r * r * 4.0),
            /*hbm_bytes_per_rank=*/2.0 * r * c * e + s * (3.0 * 4.0 * r * c + 5.0 * 4.0 * r * r),
            /*flops_per_rank=*/2.0 * r * c + s * (4.0 * r * r * c + 2.0 * r * r * r + 2.0 * r * r + 2.0 * r * c)};
  }
};

}  // namespace

PKB_PROBLEM(TpMuonOrthogonalization)
