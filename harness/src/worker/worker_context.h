// The pkb::Context a referee hands to references, and a contestant to its
// candidate (NOTE [referee and contestant]).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "pkb/context.h"
#include "worker/peers.h"

namespace pkb {

class WorkerContext final : public Context {
 public:
  WorkerContext(RankPeers& dist, Topology topology) : dist_(dist), topology_(std::move(topology)) {}

  int rank() const override { return dist_.rank(); }
  int world_size() const override { return dist_.world(); }
  at::Device device() const override { return dist_.device(); }
  void* stream() const override;
  const Topology& topology() const override { return topology_; }
  SymmetricBuffer& symmetric(const std::string& name, size_t bytes) override;

 private:
  RankPeers& dist_;
  Topology topology_;
  std::map<std::string, std::unique_ptr<SymmetricBuffer>> buffers_;
};

}  // namespace pkb
