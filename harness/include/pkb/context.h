// What a candidate (and a reference) sees of the machine: rank, world, device,
// stream, topology and symmetric memory. Everything here is reached through
// virtual calls on objects the harness owns, so a plugin needs no harness
// symbol at link time.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace pkb {

// The machine as the roofline and the candidates see it (topology/*.json).
struct Topology {
  std::string name;            // "h200_sxm_2", "cpu", ...
  std::string gpu;             // "NVIDIA H200", "" on CPU
  int gpus = 0;
  bool p2p = false;            // every pair of GPUs can map each other's memory
  bool multicast = false;      // NVLS; false by policy on the lent machines
  double nvlink_bw_per_dir = 0;  // bytes/s per GPU per direction; 0 when unknown
  double hbm_bw = 0;             // bytes/s per GPU
  double peak_bf16_flops = 0;    // dense, per GPU
};

// A named buffer allocated on every rank at once, whose peers' copies this rank
// can address directly (NVLink peer memory on GPU, POSIX shared memory on CPU).
class SymmetricBuffer {
 public:
  virtual ~SymmetricBuffer() = default;

  virtual size_t size_bytes() const = 0;
  virtual void* ptr() = 0;                      // this rank's buffer
  virtual void* peer_ptr(int rank) = 0;         // any rank's buffer (rank == own: ptr())
  virtual void* const* peer_ptrs_host() = 0;    // world_size pointers, host array
  virtual void* const* peer_ptrs_device() = 0;  // world_size pointers in device memory; null on CPU
  // Per-rank signal pads (uint32 words, zero-initialised), host and device
  // arrays of world_size pointers. See NOTE [memory ordering] in pkb/device.cuh.
  virtual void* const* signal_pads_host() = 0;
  virtual void* const* signal_pads_device() = 0;
  virtual size_t signal_pad_bytes() const = 0;
  // Only where Topology::multicast is true; null otherwise.
  virtual void* multicast_ptr() = 0;
  // All ranks reach this point before any proceeds. On GPU it is ordered on the
  // current stream (later kernels see peers' earlier writes); on CPU it blocks.
  virtual void barrier(int channel = 0) = 0;

  // A tensor view of this rank's buffer (no copy).
  at::Tensor local_tensor(at::IntArrayRef sizes, at::ScalarType dtype, at::Device device) {
    return at::from_blob(ptr(), sizes, at::TensorOptions().dtype(dtype).device(device));
  }
};

class Context {
 public:
  virtual ~Context() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual at::Device device() const = 0;
  // The stream the harness times (cudaStream_t on GPU, null on CPU). Work must
  // be ordered on it or joined back to it before solve() returns.
  virtual void* stream() const = 0;
  virtual const Topology& topology() const = 0;

  // Collective on first use of a name (every rank must ask, same name and size);
  // later calls return the same buffer. Buffers persist across calls and trials
  // of one evaluation, so a candidate may keep state in them.
  virtual SymmetricBuffer& symmetric(const std::string& name, size_t bytes) = 0;
};

}  // namespace pkb
