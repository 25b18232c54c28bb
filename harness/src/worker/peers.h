// What symmetric buffers and the timing loop need of the other ranks: rank,
// world, device, a store, and barriers through it. The referee's Distributed
// (c10d store and process group) and the contestant's ContestantPeers (a
// store proxied through its referee, no process group: NOTE [referee and
// contestant] in worker/contestant.h) both provide it.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>
#include <vector>

namespace pkb {

class RankPeers {
 public:
  virtual ~RankPeers() = default;

  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual at::Device device() const = 0;
  // Ranks share GPUs (NOTE [ranks sharing a GPU]).
  virtual bool shared_gpu() const = 0;
  virtual c10d::Store& store() = 0;
  virtual c10::intrusive_ptr<c10d::Store> store_ptr() = 0;

  // Every rank's `value` for a key used once (an all-gather through the store).
  std::vector<std::string> exchange(const std::string& key, const std::string& value);
  // This rank's half of exchange(): sets the value without waiting for peers
  // (for a rank that is about to leave).
  void publish(const std::string& key, const std::string& value);
  // All ranks reach this point (through the store; NOTE [verdicts through the store]).
  void store_barrier(const std::string& key);
  // Waits for this rank's device work (no-op on CPU).
  void device_sync() const;
  // Work enqueued after it starts at about the same moment on every rank
  // (NOTE [timing protocol], step 3).
  virtual void align_streams() = 0;
};

}  // namespace pkb
