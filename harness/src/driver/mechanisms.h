// The data-movement mechanisms a candidate's shared object can use (DESIGN.md
// §5 step 5), named from its device code and its imports.
//
// NOTE [mechanisms]
// What is detected, from what:
//  - copy_engine: the .so imports cudaMemcpy* (cudaMemcpyAsync,
//    cudaMemcpyPeerAsync, cudaMemcpy2DAsync, ...) or cuMemcpy* (nm -D).
//    Statically we cannot tell whether the copy reaches a peer's memory, so the
//    evidence says "imported", not "used on peer memory".
//  - sm_load_store: global or generic memory instructions in the SASS
//    (cuobjdump -sass): LDG, STG, ATOMG, REDG, LD, ST, ATOM, RED, LDGSTS. Almost
//    every kernel has them (it writes its output); whether an address is a
//    peer's is a run-time fact.
//  - tma: SASS UBLKCP/UBLKRED/UBLKPF (cp.async.bulk, cp.reduce.async.bulk,
//    prefetch) or UTMALDG/UTMASTG/UTMAREDG/UTMAPF (the .tensor forms), or PTX
//    cp.async.bulk* / cp.reduce.async.bulk* (cuobjdump -ptx).
//  - nvls: SASS LDGMC (multimem.ld_reduce) or PTX multimem.*. multimem.st and
//    multimem.red compile to an ordinary STG/REDG (the multicast address makes
//    them NVLS), so only the PTX names them; nvcc -arch=sm_90a embeds it.
//  - none: no device code and no cudaMemcpy* import (a CPU candidate), or
//    device code without any of the above.
//  - unknown: the .so has device code that could not be read (cuobjdump absent
//    or failing); the reason is the evidence. Imports are still read.
// The opcode names were read from cuobjdump output of kernels compiled with
// nvcc -arch=sm_90a (tests/fixtures/mechanisms).
// Limits: static, so it says what the code can do, not what ran: a kernel that
// is never launched, a branch never taken, or a cudaMemcpyAsync between local
// buffers all count. Data that torch ops move (Tensor::copy_ across devices,
// at:: kernels) is not attributed: it is libtorch's code, not the candidate's.
// Code loaded at run time (NVRTC, cuModuleLoad) is invisible.
#pragma once

#include <string>
#include <vector>

#include "common/results.h"
#include "driver/candidate_build.h"

namespace pkb {

struct Mechanism {
  std::string name;      // copy_engine, sm_load_store, tma, nvls, none, unknown
  std::string evidence;  // e.g. "SASS UBLKCP in bulk_kernel; PTX cp.async.bulk in bulk_kernel"
};

// In the order copy_engine, sm_load_store, tma, nvls, then none or unknown.
using Mechanisms = std::vector<Mechanism>;

// Reads `so_path`'s imports (nm), whether it holds device code (objdump), and
// that code's SASS and PTX with `cuobjdump` (a path; empty = not found). Tool
// failures on the device code give an "unknown" entry, never an exception;
// an unreadable .so (nm fails) throws.
Mechanisms detect_mechanisms(const std::string& so_path, const std::string& cuobjdump);

// $PKB_CUOBJDUMP, the one CMake found (pkb_build.json), the one beside nvcc,
// or one on PATH; empty when there is none.
std::string find_cuobjdump(const CandidateToolchain& tc);

// The pieces, on text, for tests.
Mechanisms mechanisms_from_imports(const std::vector<std::string>& symbols);
Mechanisms mechanisms_from_sass(const std::string& cuobjdump_sass);
Mechanisms mechanisms_from_ptx(const std::string& cuobjdump_ptx);
// Joins entries of the same name (evidence "a; b") in the canonical order.
Mechanisms merge_mechanisms(const std::vector<Mechanisms>& parts);

bool has_mechanism(const Mechanisms& m, const std::string& name);
Json mechanisms_json(const Mechanisms& m);  // [{"name": ..., "evidence": ...}]
// Compact, for tables: "ce+ldst+tma", "none", "ldst+?".
std::string mechanisms_brief(const Json& record_mechanisms);

}  // namespace pkb
