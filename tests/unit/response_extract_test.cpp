#include <gtest/gtest.h>

#include "driver/response_extract.h"

namespace pkb {
namespace {

TEST(ResponseExtract, LastLabelledBlockWins) {
  std::string r =
      "Here is a draft:\n```cuda\nint draft;\n```\nRun it with:\n```bash\nmake\n```\nFinal:\n"
      "```cpp\nint final_version;\n```\nDone.\n";
  auto c = extract_candidate(r);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->code, "int final_version;\n");
  EXPECT_EQ(c->language, "cpp");
}

TEST(ResponseExtract, LabelsAreCaseInsensitiveAndMayCarryAttributes) {
  auto c = extract_candidate("~~~CUDA {.numberLines}\n__global__ void k() {}\n~~~\n");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->language, "cuda");
  EXPECT_EQ(c->code, "__global__ void k() {}\n");
}

TEST(ResponseExtract, NoCodeBlockMeansNothing) {
  EXPECT_FALSE(extract_candidate("I cannot do that.").has_value());
  EXPECT_FALSE(extract_candidate("```python\nprint(1)\n```\n").has_value());
  EXPECT_FALSE(extract_candidate("```\nno label\n```\n").has_value());
  EXPECT_FALSE(extract_candidate("```cuda\ntruncated response").has_value());
}

TEST(ResponseExtract, ResponseFiles) {
  EXPECT_TRUE(is_response_file("a/01_allreduce/sample_0.md"));
  EXPECT_TRUE(is_response_file("x.txt"));
  EXPECT_FALSE(is_response_file("x.cu"));
  EXPECT_FALSE(is_response_file("README"));
}

}  // namespace
}  // namespace pkb
