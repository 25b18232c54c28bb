#include "worker/compare.h"

#include "pkb/check.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace pkb {

namespace {

std::string shape_str(at::IntArrayRef s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << (s.size() == 1 ? ",)" : ")");
  return os.str();
}

// NOTE [comparison where the outputs are]: the timing's checked calls (NOTE
// [fresh inputs], step 2: hundreds per evaluation) compare on the device that
// holds both outputs (CompareOn::kDevice): on an H200 machine comparing 1M
// bf16 elements on the host with torch's elementwise ops took ~25 ms, so those
// checks took 22.7 of the 23.3 s of problem 1's timing at W = 1. The few
// comparisons around them (the trials, the refreshes, the recheck, golden
// replay) run on the host in one pass (kHost), so that nothing of the
// comparison runs on the device between the candidate's calls and the
// reference's: with device comparisons there, the Gloo all_gather of problem
// 15's reference in the trials at W = 2 sharing an H100 took a median 22-40 ms
// a call, against 2-4 ms comparing on the host and 1-4 ms in the timed calls
// either way (issue 21, 2026-12-07; why device work there slows Gloo is open).
// With this split 15's evaluation at W = 2 sharing an H100 took 3.65 s against
// 3.53 s before the referee/contestant split (07e39b7, medians of 6 alternated
// runs; it was +19 % comparing on the device), its trials 0.73 s a rank
// (0.80 s), 2026-12-07. The one pass replaced the elementwise ops on the host,
// which made some twenty temporaries of the outputs' size: 10M elements took
// 0.7-1.1 s with them and 38-41 ms in one pass in float32, 66-108 ms from bf16
// (its conversion included; one core, 2026-12-07). Both compute each element's
// terms in float32, rounded as torch rounds them (Tolerance's atol and rtol as
// float32), and reduce exactly (counts, maxima): the same verdict, counts and
// errors (Compare.HostPassAndTensorOpsAgree). A device out of memory falls
// back to the host.

// On the device that holds `t`.
at::Tensor as_float(const at::Tensor& t) {
  at::Tensor c = t.detach();
  if (c.is_complex()) c = at::view_as_real(c);
  return c.to(at::kFloat).contiguous();
}

std::vector<int64_t> unravel(int64_t flat, at::IntArrayRef shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return idx;
}

}  // namespace

void compare_values_host(const at::Tensor& r, const at::Tensor& g, const Tolerance& tol, OutputDiff* d) {
  at::Tensor rf = as_float(r.cpu()), gf = as_float(g.cpu());
  const int64_t n = rf.numel();
  const float* rp = rf.data_ptr<float>();
  const float* gp = gf.data_ptr<float>();
  const float atol = static_cast<float>(tol.atol), rtol = static_cast<float>(tol.rtol);
  int64_t bad = 0, first_bad = -1;
  float max_abs = 0, max_rel = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = rp[i], b = gp[i];
    const float diff = std::fabs(b - a);
    const bool finite = std::isfinite(a) && std::isfinite(b);
    // Two roundings, as torch's mul then add: compare.cpp is built with
    // -ffp-contract=off (harness/CMakeLists.txt), so no fma fuses them.
    const float scaled = rtol * std::fabs(a);
    const float bound = atol + scaled;
    const bool ok = b == a || (std::isnan(a) && std::isnan(b)) || (finite && diff <= bound);
    if (!ok) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
    // Over the finite (nonzero-reference) elements, as the device's maxima
    // with 0 in the others' place (every candidate value is >= 0).
    if (finite) {
      max_abs = std::max(max_abs, diff);
      if (a != 0) max_rel = std::max(max_rel, diff / std::fabs(a));
    }
  }
  d->mismatches = bad;
  d->max_abs_err = max_abs;
  d->max_rel_err = max_rel;
  if (first_bad >= 0) {
    d->first_bad_index = unravel(first_bad, rf.sizes());
    d->first_bad_ref = rp[first_bad];
    d->first_bad_got = gp[first_bad];
  }
}

// NOTE [one readback]: the scalars of a comparison (the count, the two
// maxima and whether they exist) are stacked where the outputs are and
// copied back once, where it took six .item() calls and two masked_select
// (each a nonzero: one more synchronization) per output. Same verdicts,
// counts and errors (Compare.ErrorsAreTheMaximaOverTheFiniteElements, on the
// host and on a GPU). It was not what slowed problem 15's trials (NOTE
// [comparison where the outputs are]): the six .item() measured alike.
void compare_values_tensor_ops(const at::Tensor& r, const at::Tensor& g, const Tolerance& tol, OutputDiff* d) {
  PKB_CHECK(r.device() == g.device(), "compare_values_tensor_ops: the outputs are on ", r.device(), " and ",
            g.device());
  at::Tensor rf = as_float(r), gf = as_float(g);
  if (rf.numel() == 0) return;
  at::Tensor diff = (gf - rf).abs();
  // Infinities must match exactly: with ref = +inf the bound is inf too.
  at::Tensor finite = rf.isfinite() & gf.isfinite();
  at::Tensor ok = (gf == rf) | (rf.isnan() & gf.isnan()) | (finite & (diff <= tol.atol + tol.rtol * rf.abs()));
  at::Tensor bad = ok.logical_not();
  at::Tensor nz = finite & (rf != 0);
  // Over the finite (nonzero-reference) elements: the others are replaced by
  // 0, which changes no maximum (every candidate value is >= 0).
  at::Tensor zero = at::zeros({}, diff.options());
  at::Tensor max_abs = at::where(finite, diff, zero).max();
  at::Tensor max_rel = at::where(nz, diff / rf.abs(), zero).max();
  at::Tensor s = at::stack({bad.sum().to(at::kDouble), finite.any().to(at::kDouble), max_abs.to(at::kDouble),
                            nz.any().to(at::kDouble), max_rel.to(at::kDouble)})
                     .cpu();
  const double* v = s.data_ptr<double>();
  d->mismatches = static_cast<int64_t>(v[0]);
  if (v[1] != 0) d->max_abs_err = v[2];
  if (v[3] != 0) d->max_rel_err = v[4];
  if (d->mismatches > 0) {
    int64_t flat = bad.reshape({-1}).nonzero()[0][0].item<int64_t>();
    d->first_bad_index = unravel(flat, rf.sizes());
    d->first_bad_ref = rf.reshape({-1})[flat].item<double>();
    d->first_bad_got = gf.reshape({-1})[flat].item<double>();
  }
}

CompareResult compare_outputs(const Outputs& ref, const Outputs& got, const Tolerance& tol,
                              const std::vector<bool>& checked, CompareOn on) {
  CompareResult res;
  if (ref.size() != got.size()) {
    res.outcome = Outcome::kShapeMismatch;
    res.reason = "expected " + std::to_string(ref.size()) + " outputs, got " + std::to_string(got.size());
    return res;
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    const at::Tensor& r = ref[i];
    const at::Tensor& g = got[i];
    OutputDiff d;
    d.index = static_cast<int>(i);
    if (!g.defined()) {
      res.outcome = first_of(res.outcome, Outcome::kShapeMismatch);
      if (res.reason.empty()) res.reason = "output " + std::to_string(i) + " is an undefined tensor";
      res.outputs.push_back(d);
      continue;
    }
    d.shape = g.sizes().vec();
    d.dtype = c10::toString(g.scalar_type());
    d.numel = g.numel();
    if (r.sizes() != g.sizes() || r.scalar_type() != g.scalar_type()) {
      res.outcome = first_of(res.outcome, Outcome::kShapeMismatch);
      if (res.reason.empty()) {
        res.reason = "output " + std::to_string(i) + ": expected " + shape_str(r.sizes()) + " " +
                     c10::toString(r.scalar_type()) + ", got " + shape_str(g.sizes()) + " " +
                     c10::toString(g.scalar_type());
      }
      res.outputs.push_back(d);
      continue;
    }
    if (i < checked.size() && !checked[i]) {
      d.values_checked = false;
      res.outputs.push_back(d);
      continue;
    }
    if (on == CompareOn::kHost || !r.is_cuda() || r.device() != g.device()) {
      compare_values_host(r, g, tol, &d);
    } else {
      try {
        compare_values_tensor_ops(r, g, tol, &d);
      } catch (const c10::OutOfMemoryError&) {
        compare_values_host(r, g, tol, &d);
      }
    }
    if (d.mismatches > 0) {
      res.outcome = first_of(res.outcome, Outcome::kOutputMismatch);
      if (res.reason.empty()) {
        std::ostringstream os;
        os << "output " << i << ": " << d.mismatches << " of " << d.numel << " elements differ (max abs err "
           << d.max_abs_err << "); first at " << shape_str(d.first_bad_index) << ": expected "
           << d.first_bad_ref << ", got " << d.first_bad_got;
        res.reason = os.str();
      }
    }
    res.outputs.push_back(d);
  }
  return res;
}

Json to_json(const CompareResult& c) {
  Json j;
  j["outcome"] = outcome_name(c.outcome);
  j["reason"] = c.reason;
  j["outputs"] = Json::array();
  for (const auto& d : c.outputs) {
    Json o;
    o["index"] = d.index;
    o["shape"] = d.shape;
    o["dtype"] = d.dtype;
    o["numel"] = d.numel;
    o["mismatches"] = d.mismatches;
    if (!d.values_checked) o["values_checked"] = false;
    o["max_abs_err"] = d.max_abs_err;
    o["max_rel_err"] = d.max_rel_err;
    if (!d.first_bad_index.empty()) {
      o["first_bad_index"] = d.first_bad_index;
      o["first_bad_expected"] = d.first_bad_ref;
      o["first_bad_got"] = d.first_bad_got;
    }
    j["outputs"].push_back(o);
  }
  return j;
}

}  // namespace pkb
