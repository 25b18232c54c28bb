// NOTE [candidate cache key]: two checkouts of the same content at different
// paths share keys; any change of the source, the compiler or a flag gives
// another key; a pkb header changes the precompiled header's key, and a
// candidate's build only through the manifest of the headers it read.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

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

// The candidate's key leaves the checkout's headers to its build's manifest;
// the precompiled header, reused without one, keys them all.
TEST_F(CandidateCacheKey, AChangedHeaderChangesThePrecompiledHeadersKeyOnly) {
  const std::string version = "c++ (Debian 12.2.0-14) 12.2.0\n";
  const std::string before = key(b_), pch_before = precompiled_header_key(b_, version);
  EXPECT_EQ(pch_before, precompiled_header_key(a_, version));
  write(b_.source_dir + "/harness/include/pkb/context.h", "#pragma once\nstruct Context { long rank; };\n");
  EXPECT_EQ(key(b_), before);
  EXPECT_NE(precompiled_header_key(b_, version), pch_before);
}

TEST_F(CandidateCacheKey, ANewOrRenamedHeaderChangesThePrecompiledHeadersKey) {
  const std::string version = "c++ (Debian 12.2.0-14) 12.2.0\n";
  const std::string before = precompiled_header_key(b_, version);
  write(b_.source_dir + "/harness/include/pkb/extra.h", "");
  EXPECT_NE(precompiled_header_key(b_, version), before);
  CandidateToolchain c = checkout(root_ + "/renamed");
  ASSERT_EQ(precompiled_header_key(c, version), precompiled_header_key(a_, version));
  run_command("mv " + shell_quote(c.source_dir + "/harness/include/pkb/context.h") + " " +
                  shell_quote(c.source_dir + "/harness/include/pkb/contexts.h"),
              nullptr);
  EXPECT_NE(precompiled_header_key(c, version), precompiled_header_key(a_, version));
}

TEST(Depfile, GccAndNvccFormsWithEscapes) {
  EXPECT_EQ(read_depfile("/c/x.so: /s/a.cpp /usr/include/stdc-predef.h \\\n /s/inc/pkb/my\\ dir/b.h /s/c$$d.h\n"),
            (std::vector<std::string>{"/s/a.cpp", "/s/c$d.h", "/s/inc/pkb/my dir/b.h", "/usr/include/stdc-predef.h"}));
  EXPECT_EQ(read_depfile("k.so : k.cu \\\n    /s/inc/pkb/device.cuh \\\n    /s/inc/pkb/device.cuh\n"),
            (std::vector<std::string>{"/s/inc/pkb/device.cuh", "k.cu"}));
  EXPECT_TRUE(read_depfile("").empty());
}

TEST_F(CandidateCacheKey, TheManifestNamesTheCheckoutsHeadersItRead) {
  const std::string ctx = a_.source_dir + "/harness/include/pkb/context.h";
  const std::string m = header_manifest({"/opt/venv/torch/include/ATen/ATen.h", ctx, "/usr/include/stdio.h"}, true, a_);
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 1) << m;
  EXPECT_NE(m.find("\tharness/include/pkb/context.h\n"), std::string::npos) << m;
  // The same headers in another checkout: the same manifest, and it holds there.
  EXPECT_EQ(header_manifest({b_.source_dir + "/harness/include/pkb/context.h"}, true, b_), m);
  EXPECT_TRUE(header_manifest_holds(m, b_.source_dir));
  // A header it did not read changes nothing; one it read, or its removal, does.
  write(b_.source_dir + "/harness/include/pkb/device.cuh", "#pragma once\n");
  EXPECT_TRUE(header_manifest_holds(m, b_.source_dir));
  write(b_.source_dir + "/harness/include/pkb/context.h", "#pragma once\nstruct Context { long rank; };\n");
  EXPECT_FALSE(header_manifest_holds(m, b_.source_dir));
  run_command("rm " + shell_quote(a_.source_dir + "/harness/include/pkb/context.h"), nullptr);
  EXPECT_FALSE(header_manifest_holds(m, a_.source_dir));
  // Without a dependency list: every file of the in-checkout include folders.
  const std::string all = header_manifest({}, false, b_);
  EXPECT_NE(all.find("\tharness/include/pkb/context.h\n"), std::string::npos) << all;
  EXPECT_NE(all.find("\tharness/include/pkb/device.cuh\n"), std::string::npos) << all;
}

// NOTE [candidate cache key], end to end with the host compiler: a build is
// reused while the headers it read (through the precompiled header too) read
// the same, whatever else changes; each header version keeps its own build.
class CandidateBuildCache : public CandidateCacheKey {
 protected:
  void SetUp() override {
    CandidateCacheKey::SetUp();
    const char* old = std::getenv("PKB_CACHE_DIR");
    old_cache_ = old ? old : "";
    had_cache_ = old != nullptr;
    setenv("PKB_CACHE_DIR", (root_ + "/cache").c_str(), 1);
    const std::string inc = a_.source_dir + "/harness/include/pkb/";
    write(inc + "solution.h", "#pragma once\n#include \"pkb/context.h\"\n#include \"pkb/value.h\"\n");
    write(inc + "value.h", "#pragma once\nconstexpr int kValue = 1;\n");
    write(inc + "problem.h", "#pragma once\nstruct Problem {};\n");
    a_.cxx = "c++";
    a_.cxx_flags = {"-std=c++17", "-O0", "-fPIC", "-shared"};
    a_.include_dirs = {a_.source_dir + "/harness/include"};
    a_.link_flags = {};
    write(root_ + "/cand.cpp", "#include <pkb/solution.h>\nextern \"C\" int value() { return kValue; }\n");
  }
  void TearDown() override {
    if (had_cache_) setenv("PKB_CACHE_DIR", old_cache_.c_str(), 1);
    else unsetenv("PKB_CACHE_DIR");
    CandidateCacheKey::TearDown();
  }
  BuildResult build() { return build_candidate(root_ + "/cand.cpp", "cpu", a_, 120); }
  std::string old_cache_;
  bool had_cache_ = false;
};

TEST_F(CandidateBuildCache, ReusedUntilAHeaderItReadChanges) {
  if (run_command("command -v c++", nullptr).empty()) GTEST_SKIP() << "no host compiler";
  BuildResult first = build();
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cached);
  BuildResult again = build();
  EXPECT_TRUE(again.ok && again.cached);
  EXPECT_EQ(again.so_path, first.so_path);
  // A header it does not include: the same build (the precompiled header is rebuilt).
  write(a_.source_dir + "/harness/include/pkb/problem.h", "#pragma once\nstruct Problem { int id; };\n");
  BuildResult unrelated = build();
  EXPECT_TRUE(unrelated.ok && unrelated.cached) << unrelated.log;
  EXPECT_EQ(unrelated.key, first.key);
  // One it reads only through pkb/solution.h (inside the precompiled header).
  write(a_.source_dir + "/harness/include/pkb/value.h", "#pragma once\nconstexpr int kValue = 2;\n");
  BuildResult changed = build();
  ASSERT_TRUE(changed.ok) << changed.log;
  EXPECT_FALSE(changed.cached);
  EXPECT_NE(changed.so_path, first.so_path);
  EXPECT_TRUE(build().cached);
  // Back to the first version: its build is still there.
  write(a_.source_dir + "/harness/include/pkb/value.h", "#pragma once\nconstexpr int kValue = 1;\n");
  BuildResult back = build();
  EXPECT_TRUE(back.ok && back.cached);
  EXPECT_EQ(back.so_path, first.so_path);
  // A folder whose object is gone is built again in place.
  ASSERT_EQ(unlink(first.so_path.c_str()), 0);
  BuildResult rebuilt = build();
  EXPECT_TRUE(rebuilt.ok && !rebuilt.cached) << rebuilt.log;
  EXPECT_EQ(rebuilt.so_path, first.so_path);
  EXPECT_TRUE(build().cached);
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

// nvcc's dependency list (-MD -MF with the one-step -shared build) reaches
// the manifest as GCC's does.
TEST_F(CandidateBuildCache, NvccBuildsKeepAManifestToo) {
  const std::string nvcc = "/usr/local/cuda/bin/nvcc";
  struct stat st;
  if (stat(nvcc.c_str(), &st) != 0) GTEST_SKIP() << "no nvcc";
  a_.nvcc = nvcc;
  a_.cuda_flags = {"-std=c++17", "-O0", "-arch=sm_90", "-shared", "-Xcompiler=-fPIC"};
  write(root_ + "/cand.cu", "#include <pkb/value.h>\n__global__ void k(int* p) { *p = kValue; }\n");
  auto build_cu = [&] { return build_candidate(root_ + "/cand.cu", "cuda", a_, 300); };
  BuildResult first = build_cu();
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cached);
  std::ifstream m(first.so_path.substr(0, first.so_path.rfind('/')) + "/headers");
  std::stringstream manifest;
  manifest << m.rdbuf();
  EXPECT_NE(manifest.str().find("\tharness/include/pkb/value.h\n"), std::string::npos) << manifest.str();
  EXPECT_EQ(manifest.str().find("pkb/problem.h"), std::string::npos) << manifest.str();
  write(a_.source_dir + "/harness/include/pkb/problem.h", "#pragma once\nstruct Problem { int id; };\n");
  EXPECT_TRUE(build_cu().cached);
  write(a_.source_dir + "/harness/include/pkb/value.h", "#pragma once\nconstexpr int kValue = 3;\n");
  BuildResult changed = build_cu();
  ASSERT_TRUE(changed.ok) << changed.log;
  EXPECT_FALSE(changed.cached);
}

}  // namespace
}  // namespace pkb
