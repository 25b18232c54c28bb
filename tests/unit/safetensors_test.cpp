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

// A fixture file whose metadata records (world, rank, trial).
void write_fixture(const std::string& dir, const std::string& name, int world, int rank, int trial) {
  std::string meta = "{\\\"problem\\\": 1, \\\"world_size\\\": " + std::to_string(world) + ", \\\"rank\\\": " +
                     std::to_string(rank) + ", \\\"trial\\\": " + std::to_string(trial) +
                     ", \\\"inputs\\\": {\\\"list\\\": []}, \\\"outputs\\\": {\\\"list\\\": []}}";
  std::string header = "{\"__metadata__\":{\"pkb\":\"" + meta + "\"}}";
  std::ofstream f(dir + "/" + name, std::ios::binary);
  uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header;
}

TEST(Golden, SetsGroupEveryWorldSizeAndTrialAndNameWhatIsWrong) {
  std::string dir = testing::TempDir() + "/pkb_golden_sets_" + std::to_string(getpid());
  ASSERT_EQ(system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  write_fixture(dir, "w2_r0_t0.safetensors", 2, 0, 0);
  write_fixture(dir, "w2_r1_t0.safetensors", 2, 1, 0);
  write_fixture(dir, "w3_r0_t1.safetensors", 3, 0, 1);
  write_fixture(dir, "w3_r2_t1.safetensors", 3, 2, 1);  // rank 1 missing
  write_fixture(dir, "w2_r0_t4.safetensors", 2, 0, 4);
  write_fixture(dir, "w2_r1_t4.safetensors", 2, 1, 3);  // name and metadata disagree
  write_fixture(dir, "notes.txt", 2, 0, 0);              // not a fixture name: ignored
  std::vector<GoldenSet> sets = golden_sets(dir);
  ASSERT_EQ(sets.size(), 3u);
  EXPECT_EQ(sets[0].world, 2);
  EXPECT_EQ(sets[0].trial, 0);
  EXPECT_TRUE(sets[0].problem.empty()) << sets[0].problem;
  EXPECT_EQ(sets[0].files, (std::vector<std::string>{dir + "/w2_r0_t0.safetensors", dir + "/w2_r1_t0.safetensors"}));
  EXPECT_EQ(sets[1].trial, 4);
  EXPECT_NE(sets[1].problem.find("records world 2, rank 1, trial 3"), std::string::npos) << sets[1].problem;
  EXPECT_EQ(sets[2].world, 3);
  EXPECT_EQ(sets[2].trial, 1);
  EXPECT_NE(sets[2].problem.find("no file for rank 1"), std::string::npos) << sets[2].problem;
  ASSERT_EQ(system(("rm -rf '" + dir + "'").c_str()), 0);
}

}  // namespace
}  // namespace pkb
