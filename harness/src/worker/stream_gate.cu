// See stream_gate.h.
#include "worker/stream_gate.h"

#include "pkb/check.h"

namespace pkb {

namespace {

__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread polls the mapped host flag; the poll interval keeps PCIe traffic
// negligible while adding at most a microsecond to the release.
__global__ void gate_kernel(volatile int32_t* flags, uint64_t timeout_ns) {
  const uint64_t start = global_ns();
  while (flags[0] == 0) {
    if (global_ns() - start > timeout_ns) {
      flags[1] = 1;
      return;
    }
    __nanosleep(1000);
  }
}

}  // namespace

StreamGate::StreamGate() {
  void* p = nullptr;
  PKB_CUDA_CHECK(cudaHostAlloc(&p, 2 * sizeof(int32_t), cudaHostAllocMapped | cudaHostAllocPortable));
  host_ = static_cast<volatile int32_t*>(p);
  host_[0] = host_[1] = 0;
  PKB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), p, 0));
}

StreamGate::~StreamGate() {
  if (host_) {
    host_[0] = 1;  // never leave a gate closed behind us
    cudaFreeHost(const_cast<int32_t*>(host_));
  }
}

void StreamGate::close(cudaStream_t stream, double timeout_ms) {
  host_[0] = 0;
  host_[1] = 0;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  gate_kernel<<<1, 1, 0, stream>>>(device_, static_cast<uint64_t>(timeout_ms * 1e6));
  PKB_CUDA_CHECK(cudaGetLastError());
}

void StreamGate::open() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  host_[0] = 1;
}

bool StreamGate::timed_out() const { return host_[1] != 0; }

}  // namespace pkb
