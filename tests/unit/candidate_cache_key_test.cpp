// NOTE [candidate cache key]: two checkouts of the same content at different
// paths share keys; any change of a pkb header, the source, the compiler or a
// flag gives another key.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>

#include "driver/candidate_build.h"
#include "pkb/check.h"

namespace pkb {
namespace {

class CandidateCacheKey : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "pkb_cache_key_XXXXXX";
    PKB_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    root_ = tmpl;
    a_ = checkout(root_ + "/ci/run_1/pkb");
    b_ = checkout(root_ + "/elsewhere/another-name");
  }
  void TearDown() override { run_command("rm -rf " + shell_quote(root_), nullptr); }

  static void write(const std::string& path, const std::string& text) {
    run_command("mkdir -p " + shell_quote(path.substr(0, path.rfind('/'))), nullptr);
    std::ofstream(path, std::ios::binary) << text;
  }

  // A checkout's headers and the toolchain pkb_build.json would give it.
  static CandidateToolchain checkout(const std::string& src) {
    write(src + "/harness/include/pkb/context.h", "#pragma once\nstruct Context { int rank; };\n");
    write(src + "/harness/include/pkb/device.cuh", "#pragma once\n__device__ int one() { return 1; }\n");
    CandidateToolchain tc;
    tc.source_dir = src;
    tc.cxx = "/usr/bin/c++";
    tc.nvcc = "/usr/local/cuda/bin/nvcc";
    tc.cxx_flags = {"-std=c++17", "-O2", "-fPIC", "-shared"};
    tc.cuda_flags = {"-std=c++17", "-O3", "-arch=sm_90a", "-shared", "-Xcompiler=-fPIC"};
    tc.include_dirs = {src + "/harness/include", "/opt/venv/torch/include"};
    tc.link_flags = {"-L/opt/venv/torch/lib", "-Wl,-rpath,/opt/venv/torch/lib", "-ltorch_cpu", "-lc10"};
    return tc;
  }

  std::string key(const CandidateToolchain& tc, const std::string& src = "int f() { return 1; }\n",
                  bool nvcc = false, const std::string& version = "c++ (Debian 12.2.0-14) 12.2.0\n") {
    return candidate_cache_key(src, nvcc, tc, version);
  }

  std::string root_;
  CandidateToolchain a_, b_;
};

TEST_F(CandidateCacheKey, SameContentAtAnotherPathSharesTheKey) {
  EXPECT_EQ(key(a_), key(b_));
  EXPECT_EQ(key(a_, "__global__ void k() {}\n", true), key(b_, "__global__ void k() {}\n", true));
  // A trailing slash in the recorded source folder changes nothing.
  b_.source_dir += "/";
  EXPECT_EQ(key(a_), key(b_));
}

TEST_F(CandidateCacheKey, AChangedHeaderChangesTheKey) {
  const std::string before = key(b_);
  write(b_.source_dir + "/harness/include/pkb/context.h", "#pragma once\nstruct Context { long rank; };\n");
  EXPECT_NE(key(b_), before);
  EXPECT_NE(key(b_), key(a_));
}

TEST_F(CandidateCacheKey, ANewOrRenamedHeaderChangesTheKey) {
  const std::string before = key(b_);
  write(b_.source_dir + "/harness/include/pkb/extra.h", "");
  EXPECT_NE(key(b_), before);
  CandidateToolchain c = checkout(root_ + "/renamed");
  ASSERT_EQ(key(c), key(a_));
  run_command("mv " + shell_quote(c.source_dir + "/harness/include/pkb/context.h") + " " +
                  shell_quote(c.source_dir + "/harness/include/pkb/contexts.h"),
              nullptr);
  EXPECT_NE(key(c), key(a_));
}

TEST_F(CandidateCacheKey, SourceCompilerVersionAndFlagsAreInTheKey) {
  const std::string k = key(a_);
  EXPECT_NE(key(a_, "int f() { return 2; }\n"), k);
  EXPECT_NE(key(a_, "int f() { return 1; }\n", false, "c++ (Debian 13.1.0) 13.1.0\n"), k);
  EXPECT_NE(key(a_, "int f() { return 1; }\n", true), k);  // nvcc and its flags
  CandidateToolchain c = a_;
  c.cxx_flags[1] = "-O3";
  EXPECT_NE(key(c), k);
  c = a_;
  c.cxx = "/usr/bin/clang++";
  EXPECT_NE(key(c), k);
  c = a_;
  c.link_flags.push_back("-lc10_cuda");
  EXPECT_NE(key(c), k);
  // Include folders outside the checkout are keyed by their path.
  c = a_;
  c.include_dirs[1] = "/opt/other-venv/torch/include";
  EXPECT_NE(key(c), k);
}

TEST_F(CandidateCacheKey, OnlyTheCheckoutsOwnPathIsNormalised) {
  // A folder that merely starts with the checkout's path is another folder.
  CandidateToolchain a = a_, b = b_;
  a.include_dirs.push_back(a.source_dir + "2/include");
  b.include_dirs.push_back(b.source_dir + "2/include");
  EXPECT_NE(key(a), key(b));
}

TEST_F(CandidateCacheKey, TorchsVersionHeaderIsInTheKey) {
  CandidateToolchain a = a_;
  a.include_dirs[1] = root_ + "/venv/torch/include";
  write(a.include_dirs[1] + "/torch/version.h", "#define TORCH_VERSION \"2.11.0\"\n");
  const std::string k = key(a);
  write(a.include_dirs[1] + "/torch/version.h", "#define TORCH_VERSION \"2.12.0\"\n");
  EXPECT_NE(key(a), k);
}

}  // namespace
}  // namespace pkb
