// Symmetric buffers for ranks that share a GPU (NOTE [ranks sharing a GPU]):
// PyTorch's symmetric memory refuses ranks on overlapping devices, so each
// rank cudaMallocs its buffer and signal pad, exports them as CUDA IPC
// handles through the store, and maps every peer's. Peer pointers are device
// pointers a kernel loads from and stores to like NVLink peer memory, and the
// pads take the same system-scope atomics (pkb/device.cuh).
//
// barrier() waits for this rank's stream, then meets the peers through the
// store: ordered like the NVLink barrier (later work sees the peers' earlier
// writes), but it blocks the host. A device-side barrier would spin in one
// rank's kernel until the GPU time-slices to the peer's context; the kernels
// of candidates do exactly that (block_barrier), and it makes progress, but
// the harness's own barrier need not depend on it.
#include <cuda_runtime.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <vector>

#include "common/hex.h"
#include "pkb/check.h"
#include "worker/symmetric.h"

namespace pkb {

namespace {

class IpcSymmetricBuffer final : public SymmetricBuffer {
 public:
  IpcSymmetricBuffer(RankPeers& dist, const std::string& name, size_t bytes)
      : dist_(dist), name_(name), bytes_(bytes) {
    const int world = dist.world(), rank = dist.rank();
    std::string mine = name + "#" + std::to_string(bytes);
    auto all = dist.exchange("symm/" + name + "/shape", mine);
    for (int r = 0; r < world; ++r)
      PKB_CHECK(all[r] == mine, "symmetric buffer mismatch: rank ", rank, " asked for '", mine, "', rank ", r,
                " for '", all[r], "'");
    // The same pad size as PyTorch's symmetric memory, so candidates see one layout.
    pad_bytes_ = c10d::symmetric_memory::get_signal_pad_size();
    pad_offset_ = (bytes + 255) / 256 * 256;
    void* base = nullptr;
    PKB_CUDA_CHECK(cudaMalloc(&base, pad_offset_ + pad_bytes_));
    PKB_CUDA_CHECK(cudaMemset(base, 0, pad_offset_ + pad_bytes_));
    PKB_CUDA_CHECK(cudaDeviceSynchronize());
    cudaIpcMemHandle_t handle;
    PKB_CUDA_CHECK(cudaIpcGetMemHandle(&handle, base));
    auto handles = dist.exchange("symm/" + name + "/ipc", to_hex(&handle, sizeof(handle)));
    bases_.resize(world);
    for (int r = 0; r < world; ++r) {
      if (r == rank) {
        bases_[r] = base;
        continue;
      }
      cudaIpcMemHandle_t h;
      from_hex(handles[r], &h, sizeof(h));
      PKB_CUDA_CHECK(cudaIpcOpenMemHandle(&bases_[r], h, cudaIpcMemLazyEnablePeerAccess));
    }
    for (int r = 0; r < world; ++r) {
      ptrs_.push_back(bases_[r]);
      pads_.push_back(static_cast<char*>(bases_[r]) + pad_offset_);
    }
    PKB_CUDA_CHECK(cudaMalloc(&ptrs_dev_, world * sizeof(void*)));
    PKB_CUDA_CHECK(cudaMalloc(&pads_dev_, world * sizeof(void*)));
    PKB_CUDA_CHECK(cudaMemcpy(ptrs_dev_, ptrs_.data(), world * sizeof(void*), cudaMemcpyHostToDevice));
    PKB_CUDA_CHECK(cudaMemcpy(pads_dev_, pads_.data(), world * sizeof(void*), cudaMemcpyHostToDevice));
    dist.store_barrier("symm/" + name + "/mapped");
  }

  // Peers' mappings are closed before the owner frees (the worker usually
  // _exits first, which releases everything at once).
  ~IpcSymmetricBuffer() override {
    for (int r = 0; r < static_cast<int>(bases_.size()); ++r)
      if (r != dist_.rank() && bases_[r]) cudaIpcCloseMemHandle(bases_[r]);
    cudaFree(ptrs_dev_);
    cudaFree(pads_dev_);
    if (!bases_.empty()) cudaFree(bases_[dist_.rank()]);
  }

  size_t size_bytes() const override { return bytes_; }
  void* ptr() override { return ptrs_[dist_.rank()]; }
  void* peer_ptr(int rank) override {
    PKB_CHECK(rank >= 0 && rank < dist_.world(), "peer rank ", rank, " out of range");
    return ptrs_[rank];
  }
  void* const* peer_ptrs_host() override { return ptrs_.data(); }
  void* const* peer_ptrs_device() override { return ptrs_dev_; }
  void* const* signal_pads_host() override { return pads_.data(); }
  void* const* signal_pads_device() override { return pads_dev_; }
  size_t signal_pad_bytes() const override { return pad_bytes_; }
  void* multicast_ptr() override { return nullptr; }
  void barrier(int channel) override {
    PKB_CUDA_CHECK(cudaStreamSynchronize(c10::cuda::getCurrentCUDAStream(dist_.device().index()).stream()));
    dist_.store_barrier("symm/" + name_ + "/b" + std::to_string(channel) + "/" + std::to_string(generation_++));
  }

 private:
  RankPeers& dist_;
  std::string name_;
  size_t bytes_ = 0, pad_bytes_ = 0, pad_offset_ = 0;
  std::vector<void*> bases_, ptrs_, pads_;
  void** ptrs_dev_ = nullptr;
  void** pads_dev_ = nullptr;
  uint64_t generation_ = 0;
};

}  // namespace

std::unique_ptr<SymmetricBuffer> make_ipc_symmetric(RankPeers& dist, const std::string& name, size_t bytes) {
  return std::make_unique<IpcSymmetricBuffer>(dist, name, bytes);
}

}  // namespace pkb
