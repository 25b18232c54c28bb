// NOTE [CPU classes] (tests/e2e/fingerprints.py): loaded with LD_PRELOAD by
// scripts/fingerprints --class amd_avx2 (or intel_avx2), it makes a machine with AVX-512 compute
// bf16 the way an AVX2-only machine does. torch sends bf16 GEMMs and
// convolutions to oneDNN only where the CPU has AVX-512 (or AMX); elsewhere
// its own kernels run, at ATEN_CPU_CAPABILITY's width. Switching oneDNN off
// (what torch.backends.mkldnn.enabled = False does) before any op runs, with
// ATEN_CPU_CAPABILITY=avx2, takes the same path: on an AMX machine this
// reproduced the digests an AVX2-only EPYC's CI printed for problem 11
// (2026-12-02). torch reads the flag at each op, and an LD_PRELOAD library's
// constructor runs after libtorch's own initialisers (it depends on it).
#include <ATen/Context.h>

namespace {

__attribute__((constructor)) void mkldnn_off() { at::globalContext().setUserEnabledMkldnn(false); }

}  // namespace
