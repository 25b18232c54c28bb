// Facts about this pkb build, stamped into every result record.
#pragma once

#include <string>

#include "common/results.h"

namespace pkb {

std::string git_sha();
// torch, compiler, CUDA runtime and NCCL versions (those compiled in).
Json toolchain_json();
// Where the build keeps problem plugins and its candidate-compiler settings:
// the directory of the running pkb executable.
std::string build_dir();
std::string self_exe();
// The source tree this build came from (for problem READMEs and topologies).
std::string source_dir();
bool have_cuda_build();
bool have_cpu_mode();

}  // namespace pkb
