#include <gtest/gtest.h>

#include "common/outcome.h"
#include "pkb/check.h"

namespace pkb {
namespace {

TEST(Outcome, NamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(Outcome::kCorrect); ++i) {
    Outcome o = static_cast<Outcome>(i);
    EXPECT_EQ(outcome_from_name(outcome_name(o)), o);
  }
  EXPECT_STREQ(outcome_name(Outcome::kForbiddenApi), "forbidden_api");
  EXPECT_THROW(outcome_from_name("fine"), Error);
}

TEST(Outcome, EarliestInTheTaxonomyWins) {
  EXPECT_EQ(first_of(Outcome::kCorrect, Outcome::kOutputMismatch), Outcome::kOutputMismatch);
  EXPECT_EQ(first_of(Outcome::kTimeout, Outcome::kRuntimeError), Outcome::kRuntimeError);
  EXPECT_EQ(first_of(Outcome::kHarnessError, Outcome::kCompileError), Outcome::kHarnessError);
  EXPECT_EQ(first_of(Outcome::kTimingAnomaly, Outcome::kOutputMismatch), Outcome::kOutputMismatch);
}

TEST(Check, MessageCarriesLocationExpressionAndText) {
  try {
    int x = 3;
    PKB_CHECK(x == 4, "x was ", x);
    FAIL() << "no throw";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("outcome_test.cpp:"), std::string::npos) << m;
    EXPECT_NE(m.find("x == 4"), std::string::npos) << m;
    EXPECT_NE(m.find("x was 3"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace pkb
