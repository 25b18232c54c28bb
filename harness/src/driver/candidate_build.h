// Compiling candidates into shared objects, and the static check of what they
// import (DESIGN.md §5 steps 1 and 5).
//
// Builds are cached by content: the key hashes the source, the compiler
// command line and the compiler's version, so an unchanged candidate is
// compiled once per machine (cache under ~/.cache/pkb/candidates, or
// $PKB_CACHE_DIR). Diagnostics are kept beside the object and in the record.
#pragma once

#include <string>
#include <vector>

#include "common/results.h"

namespace pkb {

// The compiler settings CMake recorded for candidates (build/pkb_build.json).
struct CandidateToolchain {
  std::string cxx, nvcc;
  std::string cuobjdump;  // empty when CMake found none (see find_cuobjdump)
  std::vector<std::string> cxx_flags, cuda_flags, include_dirs, link_flags;
  std::string cxx_version, nvcc_version;  // filled lazily
  static CandidateToolchain load(const std::string& build_dir);
};

struct BuildResult {
  bool ok = false;
  bool cached = false;
  std::string so_path;
  std::string log;  // compiler diagnostics (trimmed)
  std::string key;
  double seconds = 0;
};

// `device` is "cpu" (host compiler, .cpp) or "cuda" (nvcc, .cu or .cpp).
BuildResult build_candidate(const std::string& source, const std::string& device, const CandidateToolchain& tc,
                            double timeout_s);

struct ImportCheck {
  bool ok = true;
  std::string reason;
  std::vector<std::string> offending;
};

// Rejects a shared object that imports NCCL, c10d, MPI, the harness's
// collective facade, or the dynamic loader (which could reach any of them).
ImportCheck check_imports(const std::string& so_path);
// The undefined dynamic symbols of a shared object, demangled, without @VERSION.
std::vector<std::string> imported_symbols(const std::string& so_path);
// The same rule on a list of imported symbols and needed libraries (for tests).
ImportCheck check_import_list(const std::vector<std::string>& symbols, const std::vector<std::string>& needed);

std::string cache_dir();
std::string run_command(const std::string& cmd, int* status, double timeout_s = 0);
// `s` as one single-quoted word for the shell run_command() starts.
std::string shell_quote(const std::string& s);

}  // namespace pkb
