#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "common/files.h"
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

std::string read_all(const std::string& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// No temporary file of a write (path.tmp.*) stays beside `p`.
bool no_leftovers(const std::string& p) {
  const std::string dir = p.substr(0, p.rfind('/')), stem = p.substr(p.rfind('/') + 1) + ".tmp.";
  DIR* d = opendir(dir.c_str());
  bool clean = true;
  while (dirent* e = d ? readdir(d) : nullptr) clean = clean && std::string(e->d_name).rfind(stem, 0) != 0;
  if (d) closedir(d);
  return clean;
}

TEST(Files, AtomicWriteRefusesToReplaceUnlessAsked) {
  std::string p = temp_path("a.json");
  unlink(p.c_str());
  write_file_atomic(p, "one", false);
  EXPECT_THROW(write_file_atomic(p, "two", false), Error);
  EXPECT_EQ(read_all(p), "one");
  write_file_atomic(p, "three", true);
  EXPECT_EQ(read_all(p), "three");
  EXPECT_TRUE(no_leftovers(p));
  EXPECT_THROW(write_file_atomic(temp_path("no/such/dir/x.json"), "x", false), Error);
  EXPECT_THROW(write_file_atomic(temp_path("no/such/dir/x.json"), "x", true), Error);
  unlink(p.c_str());
}

// Of writers racing for one new path, exactly one succeeds and the file holds
// its text (a check followed by a rename lets several succeed, each replacing
// the one before).
TEST(Files, RacingWritersOfANewFileHaveOneWinner) {
  for (int round = 0; round < 20; ++round) {
    std::string p = temp_path("race.json");
    unlink(p.c_str());
    constexpr int kWriters = 8;
    std::atomic<int> ready{0}, won{0}, winner{-1};
    std::vector<std::thread> ts;
    for (int i = 0; i < kWriters; ++i) {
      ts.emplace_back([&, i] {
        ++ready;
        while (ready < kWriters) {
        }
        try {
          write_file_atomic(p, "writer " + std::to_string(i), false);
          ++won;
          winner = i;
        } catch (const Error&) {
        }
      });
    }
    for (auto& t : ts) t.join();
    ASSERT_EQ(won.load(), 1) << "round " << round;
    EXPECT_EQ(read_all(p), "writer " + std::to_string(winner.load()));
    EXPECT_TRUE(no_leftovers(p));
    unlink(p.c_str());
  }
}

TEST(Files, MakeDirsCreatesEveryLevelAndKeepsWhatIsThere) {
  std::string d = temp_path("dirs/a/b/c");
  EXPECT_FALSE(is_directory(d));
  EXPECT_FALSE(is_empty_directory(d));
  make_dirs(d);
  EXPECT_TRUE(is_directory(d));
  EXPECT_TRUE(is_empty_directory(d));
  EXPECT_FALSE(is_regular_file(d));
  write_file_atomic(d + "/f", "x", false);
  EXPECT_FALSE(is_empty_directory(d));
  EXPECT_TRUE(is_regular_file(d + "/f"));
  EXPECT_FALSE(is_directory(d + "/f"));
  EXPECT_FALSE(is_empty_directory(d + "/f"));
  make_dirs(temp_path("dirs/a"));
  EXPECT_EQ(read_all(d + "/f"), "x");
  unlink((d + "/f").c_str());
}

// Whole bytes (a NUL and no trailing newline included); a file that cannot
// be opened is nullopt, or for read_file an error that names it.
TEST(Files, ReadsWholeFilesAndNamesOneItCannotOpen) {
  const std::string p = temp_path("read.bin");
  unlink(p.c_str());
  EXPECT_FALSE(read_if_present(p).has_value());
  try {
    read_file(p);
    ADD_FAILURE() << "read_file of a missing file returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  const std::string text("a\0b\nlast", 10);
  write_file_atomic(p, text, false);
  ASSERT_TRUE(read_if_present(p).has_value());
  EXPECT_EQ(*read_if_present(p), text);
  EXPECT_EQ(read_file(p), text);
  unlink(p.c_str());
}

}  // namespace
}  // namespace pkb
