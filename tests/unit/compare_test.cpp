#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "worker/compare.h"

namespace pkb {
namespace {

const Tolerance kTol;  // 1e-2 / 1e-2

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// The value fields of two comparisons of one output (NaN equals NaN).
void expect_same_values(const OutputDiff& a, const OutputDiff& b, const std::string& where) {
  EXPECT_EQ(a.mismatches, b.mismatches) << where;
  EXPECT_TRUE(same_value(a.max_abs_err, b.max_abs_err)) << where;
  EXPECT_TRUE(same_value(a.max_rel_err, b.max_rel_err)) << where;
  EXPECT_EQ(a.first_bad_index, b.first_bad_index) << where;
  EXPECT_TRUE(same_value(a.first_bad_ref, b.first_bad_ref)) << where;
  EXPECT_TRUE(same_value(a.first_bad_got, b.first_bad_got)) << where;
}

// The comparison's record, with each output's values compared both ways
// (the host's pass and torch's ops, here on the host) to the same answers.
CompareResult compare_both(const Outputs& ref, const Outputs& got, const Tolerance& tol,
                           const std::vector<bool>& checked = {}) {
  CompareResult res = compare_outputs(ref, got, tol, checked);
  for (const OutputDiff& d : res.outputs) {
    const at::Tensor &r = ref[d.index], &g = got[d.index];
    if (!d.values_checked || !g.defined() || r.sizes() != g.sizes() || r.scalar_type() != g.scalar_type()) continue;
    OutputDiff ops;
    compare_values_tensor_ops(r, g, tol, &ops);
    expect_same_values(d, ops, "output " + std::to_string(d.index));
  }
  return res;
}

TEST(Compare, EqualOutputsAreCorrect) {
  at::Tensor a = at::randn({4, 5}).to(at::kBFloat16);
  CompareResult r = compare_both({a}, {a.clone()}, kTol);
  EXPECT_EQ(r.outcome, Outcome::kCorrect);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].mismatches, 0);
}

TEST(Compare, CountShapeAndDtypeAreExact) {
  at::Tensor a = at::ones({4, 4});
  EXPECT_EQ(compare_both({a}, {a, a}, kTol).outcome, Outcome::kShapeMismatch);
  EXPECT_EQ(compare_both({a}, {at::ones({4, 5})}, kTol).outcome, Outcome::kShapeMismatch);
  EXPECT_EQ(compare_both({a}, {at::ones({16})}, kTol).outcome, Outcome::kShapeMismatch);
  CompareResult d = compare_both({a}, {a.to(at::kBFloat16)}, kTol);
  EXPECT_EQ(d.outcome, Outcome::kShapeMismatch);
  EXPECT_NE(d.reason.find("BFloat16"), std::string::npos) << d.reason;
  EXPECT_EQ(compare_both({a}, {at::Tensor()}, kTol).outcome, Outcome::kShapeMismatch);
}

TEST(Compare, ToleranceIsAtolPlusRtolTimesReference) {
  at::Tensor ref = at::full({3}, 100.0);
  // bound = 0.01 + 0.01 * 100 = 1.01
  EXPECT_EQ(compare_both({ref}, {ref + 1.0}, kTol).outcome, Outcome::kCorrect);
  CompareResult r = compare_both({ref}, {ref + 1.1}, kTol);
  EXPECT_EQ(r.outcome, Outcome::kOutputMismatch);
  EXPECT_EQ(r.outputs[0].mismatches, 3);
  EXPECT_NEAR(r.outputs[0].max_abs_err, 1.1, 1e-4);
}

TEST(Compare, ReportsFirstBadIndex) {
  at::Tensor ref = at::zeros({2, 3, 4});
  at::Tensor got = ref.clone();
  got.index_put_({1, 2, 0}, 5.0);
  got.index_put_({1, 2, 3}, 7.0);
  CompareResult r = compare_both({ref}, {got}, kTol);
  ASSERT_EQ(r.outcome, Outcome::kOutputMismatch);
  EXPECT_EQ(r.outputs[0].first_bad_index, (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(r.outputs[0].first_bad_got, 5.0);
  EXPECT_EQ(r.outputs[0].mismatches, 2);
}

TEST(Compare, NanAndInfOnlyWhereTheReferenceHasThem) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  at::Tensor ref = at::tensor({1.0f, nan, inf, -inf});
  EXPECT_EQ(compare_both({ref}, {ref.clone()}, kTol).outcome, Outcome::kCorrect);
  EXPECT_EQ(compare_both({ref}, {at::tensor({nan, nan, inf, -inf})}, kTol).outcome, Outcome::kOutputMismatch);
  EXPECT_EQ(compare_both({ref}, {at::tensor({inf, nan, inf, -inf})}, kTol).outcome, Outcome::kOutputMismatch);
  EXPECT_EQ(compare_both({ref}, {at::tensor({1.0f, 0.0f, inf, -inf})}, kTol).outcome, Outcome::kOutputMismatch);
  EXPECT_EQ(compare_both({ref}, {at::tensor({1.0f, nan, -inf, -inf})}, kTol).outcome, Outcome::kOutputMismatch);
}

TEST(Compare, IntegerBoolAndComplexCompareAsFloat) {
  at::Tensor i = at::arange(10, at::kLong);
  EXPECT_EQ(compare_both({i}, {i.clone()}, kTol).outcome, Outcome::kCorrect);
  EXPECT_EQ(compare_both({i}, {i + 1}, kTol).outcome, Outcome::kOutputMismatch);
  at::Tensor b = at::ones({3}, at::kBool);
  EXPECT_EQ(compare_both({b}, {b.logical_not()}, kTol).outcome, Outcome::kOutputMismatch);
  at::Tensor c = at::randn({4}, at::kComplexFloat);
  EXPECT_EQ(compare_both({c}, {c.clone()}, kTol).outcome, Outcome::kCorrect);
  EXPECT_EQ(compare_both({c}, {c * 2}, kTol).outcome, Outcome::kOutputMismatch);
}

TEST(Compare, UncheckedValuesStillNeedTheRightShape) {
  at::Tensor ref = at::zeros({4});
  EXPECT_EQ(compare_both({ref}, {ref + 9}, kTol, {false}).outcome, Outcome::kCorrect);
  EXPECT_EQ(compare_both({ref}, {at::zeros({5})}, kTol, {false}).outcome, Outcome::kShapeMismatch);
  EXPECT_EQ(compare_both({ref, ref}, {ref + 9, ref + 9}, kTol, {false, true}).outcome, Outcome::kOutputMismatch);
}

// The errors as the comparison computed them before NOTE [one readback]:
// masked_select over the finite (and nonzero-reference) elements.
std::pair<double, double> selected_errors(const at::Tensor& ref, const at::Tensor& got) {
  at::Tensor rf = ref.to(at::kFloat), gf = got.to(at::kFloat);
  at::Tensor diff = (gf - rf).abs();
  at::Tensor finite = rf.isfinite() & gf.isfinite();
  double abs_err = 0, rel_err = 0;
  if (finite.any().item<bool>()) {
    abs_err = diff.masked_select(finite).max().item<double>();
    at::Tensor nz = finite & (rf != 0);
    if (nz.any().item<bool>()) rel_err = (diff.masked_select(nz) / rf.abs().masked_select(nz)).max().item<double>();
  }
  return {abs_err, rel_err};
}

// On the host, and on a GPU where there is one (the device comparison).
TEST(Compare, ErrorsAreTheMaximaOverTheFiniteElements) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  at::manual_seed(7);
  const at::Device device = at::hasCUDA() ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  for (int trial = 0; trial < 20; ++trial) {
    at::Tensor ref = at::randn({257}) * 10, got = ref + at::randn({257}) * 0.05;
    // Zeros in the reference, non-finite values on either side, an overflow
    // of the difference (3e38 - -3e38 is inf in float32).
    at::Tensor pick = at::randint(0, 8, {257});
    ref = at::where(pick == 0, at::zeros_like(ref), ref);
    got = at::where(pick == 1, at::full_like(got, nan), got);
    ref = at::where(pick == 2, at::full_like(ref, inf), ref);
    got = at::where(pick == 3, at::full_like(got, -inf), got);
    if (trial % 2) {
      ref.index_put_({5}, 3e38f);
      got.index_put_({5}, -3e38f);
    }
    auto [abs_err, rel_err] = selected_errors(ref, got);
    const int64_t host_mismatches = compare_both({ref}, {got}, kTol).outputs[0].mismatches;
    EXPECT_GT(host_mismatches, 0) << trial;
    for (const at::Device& d : {at::Device(at::kCPU), device}) {
      CompareResult r = compare_outputs({ref.to(d)}, {got.to(d)}, kTol, {}, CompareOn::kDevice);
      EXPECT_EQ(r.outputs[0].max_abs_err, abs_err) << trial << " on " << d;
      EXPECT_EQ(r.outputs[0].max_rel_err, rel_err) << trial << " on " << d;
      EXPECT_EQ(r.outputs[0].mismatches, host_mismatches) << trial << " on " << d;
    }
  }
  // No finite element: both stay 0; an empty output compares equal.
  at::Tensor all_nan = at::full({4}, nan);
  CompareResult r = compare_both({all_nan}, {all_nan.clone()}, kTol);
  EXPECT_EQ(r.outcome, Outcome::kCorrect);
  EXPECT_EQ(r.outputs[0].max_abs_err, 0);
  EXPECT_EQ(r.outputs[0].max_rel_err, 0);
  EXPECT_EQ(compare_both({at::zeros({0, 3})}, {at::zeros({0, 3})}, kTol).outcome, Outcome::kCorrect);
}

// NOTE [comparison where the outputs are]: the host's one pass and torch's
// elementwise ops (on the host, and on a GPU where there is one) agree on
// every element, in particular on those within a rounding of the bound
// (atol + rtol * |ref| in float32: computed in double it differs on about
// half of them), on non-finite values and on every dtype the outputs come in.
TEST(Compare, HostPassAndTensorOpsAgree) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  at::manual_seed(11);
  std::vector<at::Device> devices{at::Device(at::kCPU)};
  if (at::hasCUDA()) devices.emplace_back(at::kCUDA, 0);
  const std::vector<Tolerance> tols{{1e-2, 1e-2}, {1e-3, 0.1}, {1e-5, 1.6e-2}, {0.7, 0.3}, {0, 0}};
  const int64_t n = 1 << 16;
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble, at::kLong}) {
    for (const Tolerance& tol : tols) {
      at::Tensor ref = (at::randn({n}, at::kDouble) * 100).to(dt);
      at::Tensor rd = ref.to(at::kDouble);
      // Half the elements a rounding either side of the bound, the others
      // scattered; then zeros and non-finite values.
      at::Tensor bound = tol.atol + tol.rtol * rd.abs();
      at::Tensor jitter = 1 + at::randn({n}, at::kDouble) * 1e-7;
      at::Tensor scatter = at::randn({n}, at::kDouble) * (bound * 2 + 1e-3);
      at::Tensor got = at::where(at::rand({n}) < 0.5, rd + bound * jitter, rd + scatter);
      if (at::isFloatingType(dt)) {
        at::Tensor pick = at::randint(0, 16, {n});
        ref = at::where(pick == 0, at::zeros_like(ref), ref);
        got = at::where(pick == 1, at::full_like(got, nan), got);
        ref = at::where(pick == 2, at::full_like(ref, inf), ref);
        got = at::where(pick == 3, at::full_like(got, -inf), got);
        got = at::where(pick == 4, ref.to(at::kDouble), got);
      }
      got = got.to(dt);
      OutputDiff host;
      compare_values_host(ref, got, tol, &host);
      EXPECT_GT(host.mismatches, 0) << dt;
      EXPECT_LT(host.mismatches, n) << dt;
      for (const at::Device& d : devices) {
        OutputDiff ops;
        compare_values_tensor_ops(ref.to(d), got.to(d), tol, &ops);
        const std::string where = std::string(c10::toString(dt)) + " atol " + std::to_string(tol.atol) + " rtol " +
                                  std::to_string(tol.rtol) + " on " + d.str();
        expect_same_values(host, ops, where);
      }
    }
  }
}

// Torch's ops compute where the outputs are; outputs on two devices are the
// caller's error (compare_outputs takes the host's pass then), never a
// silent copy.
TEST(Compare, TensorOpsNeedBothOutputsOnOneDevice) {
  at::Tensor a = at::ones({4});
  OutputDiff d;
  EXPECT_THROW(compare_values_tensor_ops(a, a.to(at::kMeta), kTol, &d), Error);
}

}  // namespace
}  // namespace pkb
