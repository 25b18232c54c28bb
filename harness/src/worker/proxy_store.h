// The contestant's c10d store: every operation goes to its referee over the
// control channel, which applies it to the evaluation's store under the
// prefix "c/" (NOTE [referee and contestant]). Contestants rendezvous their
// symmetric buffers through it; no key it can reach is one the referees read.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <mutex>

#include "common/results.h"
#include "worker/control_channel.h"

namespace pkb {

class ProxyStore final : public c10d::Store {
 public:
  explicit ProxyStore(ControlChannel& channel) : channel_(channel) {}

  c10::intrusive_ptr<c10d::Store> clone() override;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  Json call(Json req);
  ControlChannel& channel_;
  std::mutex mu_;
};

// The referee's half: applies one request (a message with "store") to
// `store` under the contestants' prefix and returns the reply message.
// Malformed requests get an error reply, never an exception.
Json serve_store_request(const Json& req, c10d::Store& store);

}  // namespace pkb
