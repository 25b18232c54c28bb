#include "common/build_info.h"

#include <limits.h>
#include <torch/version.h>
#include <unistd.h>

#include <fstream>

#ifdef PKB_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

#include "pkb/check.h"

#ifndef PKB_GIT_SHA
#define PKB_GIT_SHA "unknown"
#endif

namespace pkb {

std::string git_sha() { return PKB_GIT_SHA; }

Json toolchain_json() {
  Json j;
  j["torch"] = TORCH_VERSION;
  j["cxx"] = __VERSION__;
#ifdef PKB_HAVE_CUDA
  j["cuda_runtime"] = CUDART_VERSION;
  j["nccl"] = std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH);
#endif
  return j;
}

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  PKB_CHECK(n > 0, "cannot resolve /proc/self/exe");
  buf[n] = 0;
  return buf;
}

std::string build_dir() {
  if (const char* d = std::getenv("PKB_BUILD_DIR")) return d;
  std::string exe = self_exe();
  return exe.substr(0, exe.rfind('/'));
}

std::string source_dir() {
  std::ifstream f(build_dir() + "/pkb_build.json");
  if (!f) return "";
  Json j = Json::parse(f, nullptr, false);
  return j.is_discarded() ? "" : j.value("source_dir", "");
}

bool have_cuda_build() {
#ifdef PKB_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool have_cpu_mode() {
#ifdef PKB_HAVE_GLOO
  return true;
#else
  return false;
#endif
}

}  // namespace pkb
