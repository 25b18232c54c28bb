// A worker's view of the other ranks: the c10d store (rendezvous and verdicts)
// and the world process group (Gloo on CPU, NCCL on GPU).
//
// NOTE [verdicts through the store]
// Whether a rank's candidate ran, and whether its outputs matched, is exchanged
// through the TCPStore, never through the backend: a candidate may have left
// NCCL (or the GPU) in a state where a collective would hang or fail, and all
// ranks must still agree on what to do next, or the ones that go on wait
// forever for the ones that stopped.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "pkb/collectives.h"
#include "worker/peers.h"

namespace pkb {

struct DistributedOptions {
  int rank = 0;
  int world = 1;
  at::Device device = at::kCPU;
  // Ranks share GPUs: Gloo over CUDA tensors instead of NCCL (NOTE [ranks sharing a GPU]).
  bool shared_gpu = false;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::chrono::milliseconds timeout{300000};
};

class Distributed final : public RankPeers {
 public:
  explicit Distributed(const DistributedOptions& opts);
  ~Distributed();

  int rank() const override { return opts_.rank; }
  int world() const override { return opts_.world; }
  at::Device device() const override { return opts_.device; }
  bool shared_gpu() const override { return opts_.shared_gpu; }
  // Gloo carries the collectives: CPU mode, or CUDA ranks sharing GPUs.
  bool uses_gloo() const { return opts_.device.is_cpu() || opts_.shared_gpu; }
  c10d::Store& store() override { return *store_; }
  c10::intrusive_ptr<c10d::Store> store_ptr() override { return store_; }
  const c10::intrusive_ptr<c10d::Backend>& world_backend() const { return backend_; }
  // A tiny all-reduce on the current stream.
  void align_streams() override;

  Collectives& collectives() { return *collectives_; }

  // A backend over `ranks` (global ranks) through a prefixed store; null when
  // this rank is not a member. Collective: every rank calls it.
  c10::intrusive_ptr<c10d::Backend> make_backend(const std::vector<int64_t>& ranks, const std::string& tag);

 private:
  DistributedOptions opts_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
  // The registry keeps only a weak reference: this keeps the group alive for
  // symmetric memory's rendezvous (GPU only).
  c10::intrusive_ptr<c10::intrusive_ptr_target> registered_group_;
  std::unique_ptr<Collectives> collectives_;
};

// The torch.distributed-like facade over c10d backends.
std::unique_ptr<Collectives> make_c10d_collectives(Distributed& dist);

}  // namespace pkb
