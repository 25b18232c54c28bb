#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "common/results.h"
#include "pkb/check.h"

namespace pkb {
namespace {

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "/pkb_" + std::to_string(getpid()) + "_" + name;
}

TEST(Results, WriterNeverOverwritesAndAppendsOnResume) {
  std::string p = temp_path("w.jsonl");
  unlink(p.c_str());
  {
    JsonlWriter w(p, false);
    w.append({{"solutions", "s"}, {"problem_id", 1}, {"sample", 0}, {"world_size", 2}, {"device", "cpu"}});
  }
  EXPECT_THROW(JsonlWriter(p, false), Error);
  {
    JsonlWriter w(p, true);
    w.append({{"solutions", "s"}, {"problem_id", 2}, {"sample", 0}, {"world_size", 2}, {"device", "cpu"}});
  }
  auto recs = read_jsonl(p);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[1]["problem_id"], 2);
  auto keys = record_keys(p);
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_TRUE(keys.count(record_key(recs[0])));
  unlink(p.c_str());
}

TEST(Results, TornLastLineIsSkipped) {
  std::string p = temp_path("torn.jsonl");
  {
    std::ofstream f(p);
    f << "{\"problem_id\": 1}\n{\"problem_id\": 2, \"outc";
  }
  auto recs = read_jsonl(p);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0]["problem_id"], 1);
  unlink(p.c_str());
}

TEST(Results, AtomicWriteRefusesToReplace) {
  std::string p = temp_path("a.json");
  unlink(p.c_str());
  write_file_atomic(p, "one", false);
  EXPECT_THROW(write_file_atomic(p, "two", false), Error);
  write_file_atomic(p, "three", true);
  std::ifstream f(p);
  std::string s;
  f >> s;
  EXPECT_EQ(s, "three");
  unlink(p.c_str());
}

}  // namespace
}  // namespace pkb
