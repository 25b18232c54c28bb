// The precompiled header host-compiled candidates are built with.
#pragma once

#include <string>

namespace pkb {

// NOTE [candidate precompiled header]
// Most of a CPU candidate's compile is the host compiler parsing ATen's
// headers through pkb/solution.h (a second way, 2 cores: 94 s without, 24 s
// with, beside a busy build; measured 2026-12-02). So GCC compiles that header
// once per toolchain into a precompiled header (a .gch of ~370 MB) in the
// candidate cache, under a key made exactly as a candidate's (NOTE [candidate
// cache key]) from the header's one-line source: any change of compiler,
// flags, pkb header or torch gives a new one. Each candidate is compiled with
// `-include` of it. The object does not change, since every candidate
// includes pkb/solution.h first anyway (it has an include guard), so a
// candidate's own key does not name the header. Where it cannot be built (not
// GCC, a compile error, its timeout), or GCC finds it does not fit, the
// candidate compiles from the headers as before. Builds in parallel processes
// take turns on a lock file; a header not used for kPchKeepDays is removed
// when another is built. The cache's writer is the driver's user, as for the
// candidates' objects: a candidate running as that same user (pkb not run as
// root) could replace it as it could replace them (NOTE [untrusted
// candidates]).
constexpr int kPchKeepDays = 2;

// The header to pass to `compiler` with -include, building its .gch first if
// no process has (flags: the candidate's compile flags and include folders);
// "" when there is none. `log` gets what the header's build printed, when it
// fails.
std::string precompiled_header(const std::string& compiler, const std::string& compiler_version,
                               const std::string& flags, const std::string& key, double timeout_s,
                               std::string* log);

// The header's text: what every candidate includes first.
const char* precompiled_header_source();

}  // namespace pkb
