#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "common/golden_fixture.h"
#include "common/safetensors.h"
#include "pkb/check.h"

namespace pkb {
namespace {

// Writes a safetensors file by hand: 8-byte header length, JSON, data.
std::string write_file(const std::string& header, const std::string& data) {
  std::string p = testing::TempDir() + "/pkb_st_" + std::to_string(getpid()) + ".safetensors";
  std::ofstream f(p, std::ios::binary);
  uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << data;
  return p;
}

std::string bytes_of(const at::Tensor& t) {
  return std::string(static_cast<const char*>(t.data_ptr()), t.nbytes());
}

TEST(Safetensors, ReadsTensorsAndMetadata) {
  at::Tensor a = at::arange(6, at::kFloat).reshape({2, 3}).to(at::kBFloat16);
  at::Tensor b = at::tensor({7, 8}, at::kLong);
  std::string header =
      R"({"x":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
      R"("y":{"dtype":"I64","shape":[2],"data_offsets":[12,28]},"__metadata__":{"k":"v"}})";
  std::string p = write_file(header, bytes_of(a) + bytes_of(b));
  SafetensorsFile f = read_safetensors(p);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_TRUE(at::equal(f.tensors["x"], a));
  EXPECT_TRUE(at::equal(f.tensors["y"], b));
  EXPECT_EQ(f.metadata["k"], "v");
  unlink(p.c_str());
}

TEST(Safetensors, RejectsBadOffsets) {
  std::string p = write_file(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "short");
  EXPECT_THROW(read_safetensors(p), Error);
  unlink(p.c_str());
}

TEST(Golden, FlattensArgumentsInOrder) {
  at::Tensor a = at::ones({2}, at::kFloat);
  std::string meta =
      R"({"problem": 4, "world_size": 2, "rank": 1, "m": 2, "n": 1, )"
      R"("inputs": {"list": [{"tensor": "input.0", "dtype": "float32", "shape": [2]}, {"int": 0},)"
      R"( {"list": [{"float": 0.5}, {"group": [0, 1]}]}, {"module": "Linear", "state": {"weight": {"tensor": "input.0"}, "bias": {"none": true}}}]},)"
      R"( "outputs": {"tuple": [{"tensor": "output.0"}, {"int": 3}]}})";
  std::string escaped;
  for (char c : meta) escaped += c == '"' ? std::string("\\\"") : std::string(1, c);
  std::string header = R"({"input.0":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("output.0":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"__metadata__":{"pkb":")" +
                       escaped + "\"}}";
  std::string p = write_file(header, bytes_of(a) + bytes_of(a * 3));
  GoldenFixture g = load_golden(p);
  EXPECT_EQ(g.problem_id, 4);
  EXPECT_EQ(g.rank, 1);
  ASSERT_EQ(g.inputs.size(), 6u);
  EXPECT_TRUE(g.inputs.is_tensor(0));
  EXPECT_EQ(g.inputs.integer(1), 0);
  EXPECT_EQ(g.inputs.real(2), 0.5);
  EXPECT_EQ(g.inputs.group(3).ranks, (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(g.inputs.is_tensor(4));  // the module's weight, then its bias
  EXPECT_TRUE(std::holds_alternative<None>(g.inputs.at(5).value));
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_TRUE(at::equal(g.outputs[0], a * 3));
  EXPECT_EQ(g.notes.size(), 1u);  // the int output is not compared, and says so
  EXPECT_THROW(g.inputs.integer(0), Error);
  unlink(p.c_str());
}

}  // namespace
}  // namespace pkb
