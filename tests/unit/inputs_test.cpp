// The conveniences of pkb::Inputs that problems lean on: the list a
// make_inputs returns in one expression, and the first N tensors at once.
#include <gtest/gtest.h>

#include "pkb/inputs.h"

namespace pkb {
namespace {

TEST(Inputs, InitializerListKeepsOrderNamesAndTypes) {
  at::Tensor x = at::arange(4);
  Inputs in{{"x", x}, {"eps", 1e-5}, {"k", int64_t{2}}, {"mask", None{}}, {"group", GroupRanks{{0, 1}}}};
  ASSERT_EQ(in.size(), 5u);
  EXPECT_EQ(in.at(0).name, "x");
  EXPECT_TRUE(in.tensor(0).is_same(x));  // the handle, not a copy of the data
  EXPECT_EQ(in.at(1).name, "eps");
  EXPECT_DOUBLE_EQ(in.real(1), 1e-5);
  EXPECT_EQ(in.integer(2), 2);
  EXPECT_FALSE(in.is_tensor(3));
  EXPECT_EQ(in.group(4).ranks, (std::vector<int64_t>{0, 1}));
}

// The braces evaluate in order (a braced list's clauses are sequenced), so a
// draw written inside them keeps the RNG order that in.add() statements had.
TEST(Inputs, InitializerListDrawsInOrder) {
  at::manual_seed(7);
  at::Tensor a = at::randn({3});
  at::Tensor b = at::randn({3});
  at::manual_seed(7);
  Inputs in{{"a", at::randn({3})}, {"b", at::randn({3})}};
  EXPECT_TRUE(at::equal(in.tensor(0), a));
  EXPECT_TRUE(at::equal(in.tensor(1), b));
}

TEST(Inputs, ReturnedAsBracedList) {
  auto make = []() -> Inputs { return {{"t", at::ones({2})}, {"n", int64_t{3}}}; };
  Inputs in = make();
  EXPECT_EQ(in.size(), 2u);
  EXPECT_EQ(in.integer(1), 3);
}

TEST(Inputs, FirstTensorsBindTheInputsThemselves) {
  at::Tensor x = at::arange(4), w = at::ones({2});
  Inputs in{{"x", x}, {"w", w}, {"eps", 1e-5}};
  const auto [a, b] = in.tensors<2>();
  EXPECT_TRUE(a.is_same(x));
  EXPECT_TRUE(b.is_same(w));
}

TEST(Inputs, FirstTensorsRejectANonTensor) {
  Inputs in{{"x", at::arange(4)}, {"eps", 1e-5}};
  EXPECT_THROW(in.tensors<2>(), std::exception);
}

}  // namespace
}  // namespace pkb
