#include "worker/distributed.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef PKB_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef PKB_HAVE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>
#endif

#include "pkb/check.h"

namespace pkb {

namespace {

c10::intrusive_ptr<c10d::Backend> create_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                 int size, at::Device device, bool gloo,
                                                 std::chrono::milliseconds timeout) {
  if (gloo) {
#ifdef PKB_HAVE_GLOO
    auto opts = c10d::ProcessGroupGloo::Options::create();
    opts->timeout = timeout;
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
#else
    PKB_CHECK(false, device.is_cpu() ? "CPU mode" : "Ranks sharing a GPU (which need Gloo)",
              " is not compiled into this pkb (it needs gloo headers: Debian libgloo-dev; reconfigure with them "
              "installed, or -DGLOO_INCLUDE_DIR=...; scripts/device-check carries them to GPU machines)");
#endif
  }
#ifdef PKB_HAVE_CUDA
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
#else
  PKB_CHECK(false, "the GPU path is not compiled into this pkb (no CUDA toolkit at configure time)");
#endif
}

}  // namespace

Distributed::Distributed(const DistributedOptions& opts) : opts_(opts) {
#ifdef PKB_HAVE_CUDA
  if (opts.device.is_cuda()) c10::cuda::set_device(opts.device.index());
#endif
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(opts.master_port);
  so.isServer = false;  // the driver serves it (NOTE [store in the driver])
  so.waitWorkers = false;
  so.timeout = opts.timeout;
  store_ = c10::make_intrusive<c10d::TCPStore>(opts.master_addr, so);
  auto world_store = c10::make_intrusive<c10d::PrefixStore>("world", store_);
  backend_ = create_backend(world_store, opts.rank, opts.world, opts.device, uses_gloo(), opts.timeout);
#ifdef PKB_HAVE_CUDA
  if (opts.device.is_cuda() && !opts.shared_gpu) {
    // Symmetric memory resolves its group by name through the registry.
    auto pg = c10::make_intrusive<c10d::ProcessGroup>(world_store, opts.rank, opts.world);
    pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, backend_);
    pg->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
    c10d::register_process_group("pkb", pg);
    registered_group_ = pg;
    c10d::symmetric_memory::set_group_info("pkb", opts.rank, opts.world, store_);
  }
#endif
  collectives_ = make_c10d_collectives(*this);
}

Distributed::~Distributed() = default;

void Distributed::align_streams() {
  std::vector<at::Tensor> t{at::zeros({1}, at::TensorOptions().device(opts_.device))};
  backend_->allreduce(t)->wait();
}

c10::intrusive_ptr<c10d::Backend> Distributed::make_backend(const std::vector<int64_t>& ranks,
                                                            const std::string& tag) {
  int group_rank = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    PKB_CHECK(ranks[i] >= 0 && ranks[i] < opts_.world, "group rank ", ranks[i], " outside world of ",
              opts_.world);
    if (ranks[i] == opts_.rank) group_rank = static_cast<int>(i);
  }
  store_barrier("group/" + tag);
  if (group_rank < 0) return {};
  auto s = c10::make_intrusive<c10d::PrefixStore>("group/" + tag, store_);
  return create_backend(s, group_rank, static_cast<int>(ranks.size()), opts_.device, uses_gloo(), opts_.timeout);
}

}  // namespace pkb
