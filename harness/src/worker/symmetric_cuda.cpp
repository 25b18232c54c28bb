// GPU symmetric buffers through PyTorch's C++ symmetric memory: one
// empty_strided_p2p allocation per name, rendezvous'd over the world group
// registered as "pkb" (worker/distributed.cpp). Peers' buffers are NVLink
// mappings a kernel can load from and store to directly.
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <vector>

#include "pkb/check.h"
#include "worker/symmetric.h"

namespace pkb {

namespace {

class CudaSymmetricBuffer final : public SymmetricBuffer {
 public:
  CudaSymmetricBuffer(RankPeers& dist, const std::string& name, size_t bytes) : bytes_(bytes) {
    std::string mine = name + "#" + std::to_string(bytes);
    auto all = dist.exchange("symm/" + name + "/shape", mine);
    for (int r = 0; r < dist.world(); ++r)
      PKB_CHECK(all[r] == mine, "symmetric buffer mismatch: rank ", dist.rank(), " asked for '", mine, "', rank ",
                r, " for '", all[r], "'");
    tensor_ = c10d::symmetric_memory::empty_strided_p2p({static_cast<int64_t>(bytes)}, {1}, at::kByte,
                                                          dist.device(), std::string("pkb"), std::nullopt);
    tensor_.zero_();
    handle_ = c10d::symmetric_memory::rendezvous(tensor_, std::string("pkb"));
    ptrs_ = handle_->get_buffer_ptrs();
    pads_ = handle_->get_signal_pad_ptrs();
    dist.device_sync();
    dist.store_barrier("symm/" + name + "/ready");
  }

  size_t size_bytes() const override { return bytes_; }
  void* ptr() override { return tensor_.data_ptr(); }
  void* peer_ptr(int rank) override {
    PKB_CHECK(rank >= 0 && rank < static_cast<int>(ptrs_.size()), "peer rank ", rank, " out of range");
    return ptrs_[rank];
  }
  void* const* peer_ptrs_host() override { return ptrs_.data(); }
  void* const* peer_ptrs_device() override { return handle_->get_buffer_ptrs_dev(); }
  void* const* signal_pads_host() override { return pads_.data(); }
  void* const* signal_pads_device() override { return handle_->get_signal_pad_ptrs_dev(); }
  size_t signal_pad_bytes() const override { return handle_->get_signal_pad_size(); }
  // NVLS stays off on the lent machines (policy); see Topology::multicast.
  void* multicast_ptr() override { return handle_->has_multicast_support() ? handle_->get_multicast_ptr() : nullptr; }
  void barrier(int channel) override { handle_->barrier(channel, kBarrierTimeoutMs); }

 private:
  static constexpr size_t kBarrierTimeoutMs = 60000;
  size_t bytes_;
  at::Tensor tensor_;
  c10::intrusive_ptr<c10d::symmetric_memory::SymmetricMemory> handle_;
  std::vector<void*> ptrs_, pads_;
};

}  // namespace

std::unique_ptr<SymmetricBuffer> make_cuda_symmetric(RankPeers& dist, const std::string& name, size_t bytes) {
  return std::make_unique<CudaSymmetricBuffer>(dist, name, bytes);
}

}  // namespace pkb
