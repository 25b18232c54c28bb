// Tensors between the referee and the contestant (NOTE [referee and
// contestant]): shared regions both processes map (a sealed memfd on CPU, a
// cudaMalloc block exported by CUDA IPC on GPU), and descriptors (JSON) of
// where each tensor of an argument list or an output list lies in one.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>

#include "common/results.h"
#include "pkb/inputs.h"

namespace pkb {

class SharedRegion : public std::enable_shared_from_this<SharedRegion> {
 public:
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  // The owner's side: a new region of at least `bytes` on `device`.
  static std::shared_ptr<SharedRegion> create(size_t bytes, const at::Device& device);
  // The other side: what describe() said, and on CPU the fd it came with
  // (taken over). Checks what a hostile owner could get wrong (size, seals).
  static std::shared_ptr<SharedRegion> open(const Json& desc, int fd, const at::Device& device);

  Json describe() const;
  int fd() const { return fd_; }  // CPU only; -1 on GPU
  char* data() { return static_cast<char*>(ptr_); }
  size_t bytes() const { return bytes_; }
  const at::Device& device() const { return device_; }

 private:
  SharedRegion(const at::Device& d) : device_(d) {}
  at::Device device_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  int fd_ = -1;
  bool owner_ = false;
  std::string ipc_;  // hex of the cudaIpcMemHandle_t (GPU)
};

// Bytes a list of tensors needs in one region (each 256-aligned).
size_t region_bytes_for(const std::vector<at::Tensor>& ts);

// Copies `in`'s tensors into `r` (from offset 0) and returns the descriptor of
// the whole argument list; *views gets the same list with its tensors as
// views of the region (what the other process will see).
Json place_inputs(const Inputs& in, SharedRegion& r, Inputs* views);
// The argument list a descriptor names, its tensors views of `r`.
Inputs inputs_from(const Json& desc, SharedRegion& r);
// The same where a tensor's descriptor may name a region of its own
// ("region": id, as a fixed input's does: NOTE [fixed inputs]); `region` for
// those that do not.
Inputs inputs_from(const Json& desc, const std::function<SharedRegion&(int)>& region_of, int region);

// The same for an output list (tensors stored contiguous; undefined kept).
Json place_outputs(const Outputs& out, SharedRegion& r);
// Fresh tensors (copies, not views) of the outputs a descriptor names; throws
// a std::runtime_error naming what is wrong when the descriptor (written by
// the untrusted side) does not fit the region.
Outputs outputs_from(const Json& desc, SharedRegion& r);

}  // namespace pkb
