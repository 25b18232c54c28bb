// Compiling candidates into shared objects, and the static check of what they
// import (DESIGN.md §5 steps 1 and 5).
//
// Builds are cached by content (NOTE [candidate cache key]), so an unchanged
// candidate is compiled once per machine, whichever checkout asks (cache
// under ~/.cache/pkb/candidates, or $PKB_CACHE_DIR). Diagnostics are kept
// beside the object and in the record.
#pragma once

#include <string>
#include <vector>

#include "common/results.h"

namespace pkb {

// The compiler settings CMake recorded for candidates (build/pkb_build.json).
struct CandidateToolchain {
  std::string source_dir;  // the checkout CMake configured (its path is kept out of cache keys)
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
  bool no_code = false;  // a raw response without a code block: nothing was compiled (log says why)
  std::string key;
  double seconds = 0;
};

// NOTE [candidate cache key]
// A build's key hashes what decides the object, and not where the checkout
// is: the candidate's source; the compiler's path and its `--version`; the
// flags and link flags, with the checkout's path written as "<source>"; and
// torch/version.h of the include folders outside the checkout (torch's
// headers are keyed by their path and version, CUDA's by nvcc's version). A
// fresh clone at another path therefore hits the builds of an identical one.
//
// The pkb headers inside the checkout (harness/include, the second ways'
// include folder) are not in the key: each build records the ones it read,
// by path relative to the checkout and content (the compiler's dependency
// list: `-MD`, or a `-M` pass where the precompiled header hides them), in a
// manifest beside its object, and a build is reused only while every header
// of its manifest still reads the same. A change to a header a candidate
// does not include (pkb/problem.h, for one) thus costs no candidate a
// rebuild, and one it does include misses every build that read it. Builds
// against other header versions sit side by side under the key (a folder
// per manifest), so two checkouts used in turn do not evict each other.
// Without a dependency list the manifest holds every file of the in-checkout
// include folders (what the key itself held before).
// `compiler_version` is what `compiler --version` printed.
std::string candidate_cache_key(const std::string& source_text, bool use_nvcc, const CandidateToolchain& tc,
                                const std::string& compiler_version);

// The precompiled header's key (NOTE [candidate precompiled header]): the
// candidate key of its source plus the content of every file of the
// in-checkout include folders, since it is reused without a manifest.
std::string precompiled_header_key(const CandidateToolchain& tc, const std::string& compiler_version);

// NOTE [candidate cache key]: the manifest of the in-checkout headers among
// `deps` (paths as the compiler listed them), one "hash<TAB>path" line per
// header, sorted; `deps_known` false makes it every file of the in-checkout
// include folders instead. `holds` tells whether a manifest's headers still
// read the same in the checkout `source_dir`.
std::string header_manifest(const std::vector<std::string>& deps, bool deps_known, const CandidateToolchain& tc);
bool header_manifest_holds(const std::string& manifest, const std::string& source_dir);
// The prerequisites of a make-style dependency file (what -MD / -M write).
std::vector<std::string> read_depfile(const std::string& text);

// `device` is "cpu" (host compiler, .cpp) or "cuda" (nvcc, .cu or .cpp).
BuildResult build_candidate(const std::string& source, const std::string& device, const CandidateToolchain& tc,
                            double timeout_s);

struct ImportCheck {
  bool ok = true;
  std::string reason;
  std::vector<std::string> offending;
};

// NOTE [forbidden routes]
// Rejects (forbidden_api, the route named) a shared object that imports NCCL,
// c10d, Gloo, MPI, the harness's collective facade, the dynamic loader, the
// operator dispatcher (c10::Dispatcher, OperatorHandle, torch::jit operator
// lookup: the way to _c10d_functional::all_reduce and the c10d:: ops without a
// c10d import), or a walker of loaded objects (dl_iterate_phdr, dladdr,
// dlinfo, _r_debug, getauxval, __libc_dl*); or whose bytes hold a string that
// names such a route ("_c10d_functional", "c10d::", "/proc/self/maps",
// "libnccl", "resolve_process_group"). The strings are a static check a
// candidate can evade by building them at run time; the imports are not
// evadable without one of the imports above (or raw syscalls reading
// /proc/self/maps, which no static check decides). At run time, on GPU, the
// world group is unregistered from c10d's registry while a candidate runs
// (worker/route_guard.h), so no collective resolves it by name, and every
// NCCL call bound by name while it runs (c10d's included) is counted and makes
// the call forbidden_api (NOTE [NCCL calls counted], worker/nccl_guard.h); a
// candidate that finds NCCL's functions by address (parsing its own memory map
// and libnccl's ELF tables) and builds its own communicator is not caught.
ImportCheck check_imports(const std::string& so_path);
// The string part of check_imports, on the .so's bytes (for tests).
ImportCheck check_strings(const std::string& so_bytes);
// The undefined dynamic symbols of a shared object, demangled, without @VERSION.
std::vector<std::string> imported_symbols(const std::string& so_path);
// The same rule on a list of imported symbols and needed libraries (for tests).
ImportCheck check_import_list(const std::vector<std::string>& symbols, const std::vector<std::string>& needed);

std::string cache_dir();
std::string run_command(const std::string& cmd, int* status, double timeout_s = 0);
// `s` as one single-quoted word for the shell run_command() starts.
std::string shell_quote(const std::string& s);

}  // namespace pkb
