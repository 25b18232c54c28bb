#include <gtest/gtest.h>

#include <limits>

#include "worker/compare.h"

namespace pkb {
namespace {

const Tolerance kTol;  // 1e-2 / 1e-2

TEST(Compare, EqualOutputsAreCorrect) {
  at::Tensor a = at::randn({4, 5}).to(at::kBFloat16);
  CompareResult r = compare_outputs({a}, {a.clone()}, kTol);
  EXPECT_EQ(r.outcome, Outcome::kCorrect);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].mismatches, 0);
}

TEST(Compare, CountShapeAndDtypeAreExact) {
  at::Tensor a = at::ones({4, 4});
  EXPECT_EQ(compare_outputs({a}, {a, a}, kTol).outcome, Outcome::kShapeMismatch);
  EXPECT_EQ(compare_outputs({a}, {at::ones({4, 5})}, kTol).outcome, Outcome::kShapeMismatch);
  EXPECT_EQ(compare_outputs({a}, {at::ones({16})}, kTol).outcome, Outcome::kShapeMismatch);
  CompareResult d = compare_outputs({a}, {a.to(at::kBFloat16)}, kTol);
  EXPECT_EQ(d.outcome, Outcome::kShapeMismatch);
  EXPECT_NE(d.reason.find("BFloat16"), std::string::npos) << d.reason;
  EXPECT_EQ(compare_outputs({a}, {at::Tensor()}, kTol).outcome, Outcome::kShapeMismatch);
}

TEST(Compare, ToleranceIsAtolPlusRtolTimesReference) {
  at::Tensor ref = at::full({3}, 100.0);
  // bound = 0.01 + 0.01 * 100 = 1.01
  EXPECT_EQ(compare_outputs({ref}, {ref + 1.0}, kTol).outcome, Outcome::kCorrect);
  CompareResult r = compare_outputs({ref}, {ref + 1.1}, kTol);
  EXPECT_EQ(r.outcome, Outcome::kOutputMismatch);
  EXPECT_EQ(r.outputs[0].mismatches, 3);
  EXPECT_NEAR(r.outputs[0].max_abs_err, 1.1, 1e-4);
}

TEST(Compare, ReportsFirstBadIndex) {
  at::Tensor ref = at::zeros({2, 3, 4});
  at::Tensor got = ref.clone();
  got.index_put_({1, 2, 0}, 5.0);
  got.index_put_({1, 2, 3}, 7.0);
  CompareResult r = compare_outputs({ref}, {got}, kTol);
  ASSERT_EQ(r.outcome, Outcome::kOutputMismatch);
  EXPECT_EQ(r.outputs[0].first_bad_index, (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(r.outputs[0].first_bad_got, 5.0);
  EXPECT_EQ(r.outputs[0].mismatches, 2);
}

TEST(Compare, NanAndInfOnlyWhereTheReferenceHasThem) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  at::Tensor ref = at::tensor({1.0f, nan, inf, -inf});
  EXPECT_EQ(compare_outputs({ref}, {ref.clone()}, kTol).outcome, Outcome::kCorrect);
  EXPECT_EQ(compare_outputs({ref}, {at::tensor({nan, nan, inf, -inf})}, kTol).outcome, Outcome::kOutputMismatch);
  EXPECT_EQ(compare_outputs({ref}, {at::tensor({inf, nan, inf, -inf})}, kTol).outcome, Outcome::kOutputMismatch);
  EXPECT_EQ(compare_outputs({ref}, {at::tensor({1.0f, 0.0f, inf, -inf})}, kTol).outcome, Outcome::kOutputMismatch);
  EXPECT_EQ(compare_outputs({ref}, {at::tensor({1.0f, nan, -inf, -inf})}, kTol).outcome, Outcome::kOutputMismatch);
}

TEST(Compare, IntegerBoolAndComplexCompareAsFloat) {
  at::Tensor i = at::arange(10, at::kLong);
  EXPECT_EQ(compare_outputs({i}, {i.clone()}, kTol).outcome, Outcome::kCorrect);
  EXPECT_EQ(compare_outputs({i}, {i + 1}, kTol).outcome, Outcome::kOutputMismatch);
  at::Tensor b = at::ones({3}, at::kBool);
  EXPECT_EQ(compare_outputs({b}, {b.logical_not()}, kTol).outcome, Outcome::kOutputMismatch);
  at::Tensor c = at::randn({4}, at::kComplexFloat);
  EXPECT_EQ(compare_outputs({c}, {c.clone()}, kTol).outcome, Outcome::kCorrect);
  EXPECT_EQ(compare_outputs({c}, {c * 2}, kTol).outcome, Outcome::kOutputMismatch);
}

TEST(Compare, UncheckedValuesStillNeedTheRightShape) {
  at::Tensor ref = at::zeros({4});
  EXPECT_EQ(compare_outputs({ref}, {ref + 9}, kTol, {false}).outcome, Outcome::kCorrect);
  EXPECT_EQ(compare_outputs({ref}, {at::zeros({5})}, kTol, {false}).outcome, Outcome::kShapeMismatch);
  EXPECT_EQ(compare_outputs({ref, ref}, {ref + 9, ref + 9}, kTol, {false, true}).outcome, Outcome::kOutputMismatch);
}

}  // namespace
}  // namespace pkb
