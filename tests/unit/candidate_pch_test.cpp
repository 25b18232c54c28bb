// NOTE [candidate precompiled header]: built once per key, used by the
// compiler (GCC's -H marks a used one with '!'), absent where it cannot be
// built, and headers left unused for kPchKeepDays are pruned.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <utime.h>

#include <ctime>
#include <fstream>

#include "driver/candidate_build.h"
#include "driver/candidate_pch.h"
#include "pkb/check.h"

namespace pkb {
namespace {

class CandidatePch : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "pkb_pch_XXXXXX";
    PKB_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    root_ = tmpl;
    old_cache_ = getenv("PKB_CACHE_DIR") ? getenv("PKB_CACHE_DIR") : "";
    setenv("PKB_CACHE_DIR", (root_ + "/cache").c_str(), 1);
    // A stand-in for pkb/solution.h that compiles in milliseconds.
    write(root_ + "/include/pkb/solution.h", "#pragma once\ninline int pkb_answer() { return 42; }\n");
    flags_ = " '-std=c++17' '-O2' '-fPIC' -I'" + root_ + "/include'";
    int st = 0;
    version_ = run_command("c++ --version", &st);
  }
  void TearDown() override {
    if (old_cache_.empty()) unsetenv("PKB_CACHE_DIR");
    else setenv("PKB_CACHE_DIR", old_cache_.c_str(), 1);
    run_command("rm -rf " + shell_quote(root_), nullptr);
  }
  static void write(const std::string& path, const std::string& text) {
    run_command("mkdir -p " + shell_quote(path.substr(0, path.rfind('/'))), nullptr);
    std::ofstream(path, std::ios::binary) << text;
  }
  static bool exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
  }
  // A unique key per test: the builds are remembered per process and key.
  std::string key(const std::string& what) const { return what + "-" + root_.substr(root_.rfind('/') + 1); }

  std::string root_, old_cache_, flags_, version_;
};

TEST_F(CandidatePch, IsBuiltOnceAndTheCompilerUsesIt) {
  if (version_.find("Free Software Foundation") == std::string::npos) GTEST_SKIP() << "not GCC";
  const std::string k = key("used");
  const std::string header = precompiled_header("c++", version_, flags_, k, 120, nullptr);
  ASSERT_FALSE(header.empty());
  ASSERT_TRUE(exists(header + ".gch"));
  struct stat first;
  ASSERT_EQ(stat((header + ".gch").c_str(), &first), 0);
  EXPECT_EQ(precompiled_header("c++", version_, flags_, k, 120, nullptr), header);

  write(root_ + "/c.cpp", "#include <pkb/solution.h>\nint f() { return pkb_answer(); }\n");
  int st = 0;
  const std::string out = run_command("c++" + flags_ + " -include " + shell_quote(header) + " -H -c -o " +
                                          shell_quote(root_ + "/c.o") + " " + shell_quote(root_ + "/c.cpp"),
                                      &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("! " + header + ".gch"), std::string::npos) << out;
}

TEST_F(CandidatePch, NoneForAnotherCompilerOrABrokenHeader) {
  EXPECT_EQ(precompiled_header("clang++", "clang version 17.0.6", flags_, key("clang"), 120, nullptr), "");
  if (version_.find("Free Software Foundation") == std::string::npos) GTEST_SKIP() << "not GCC";
  write(root_ + "/include/pkb/solution.h", "#pragma once\nthis is not C++;\n");
  std::string log;
  EXPECT_EQ(precompiled_header("c++", version_, flags_, key("broken"), 120, &log), "");
  EXPECT_NE(log.find("error"), std::string::npos) << log;
}

TEST_F(CandidatePch, HeadersUnusedForDaysArePrunedWhenAnotherIsBuilt) {
  if (version_.find("Free Software Foundation") == std::string::npos) GTEST_SKIP() << "not GCC";
  const std::string cache = root_ + "/cache";
  for (const std::string name : {"pch-stale", "pch-recent"}) {
    write(cache + "/" + name + "/candidate.h", precompiled_header_source());
    write(cache + "/" + name + "/candidate.h.gch", "not a real header");
  }
  utimbuf days_ago{time(nullptr) - (kPchKeepDays + 1) * 86400, time(nullptr) - (kPchKeepDays + 1) * 86400};
  ASSERT_EQ(utime((cache + "/pch-stale/candidate.h.gch").c_str(), &days_ago), 0);
  write(cache + "/0123456789abcdef/candidate.so", "a candidate's object");
  ASSERT_EQ(utime((cache + "/0123456789abcdef/candidate.so").c_str(), &days_ago), 0);

  ASSERT_FALSE(precompiled_header("c++", version_, flags_, key("new"), 120, nullptr).empty());
  EXPECT_FALSE(exists(cache + "/pch-stale"));
  EXPECT_TRUE(exists(cache + "/pch-recent/candidate.h.gch"));
  EXPECT_TRUE(exists(cache + "/0123456789abcdef/candidate.so"));  // only headers are pruned
}

}  // namespace
}  // namespace pkb
