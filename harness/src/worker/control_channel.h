// The referee's and the contestant's only connection: one AF_UNIX
// SOCK_SEQPACKET socket pair, one JSON message per packet, file descriptors
// (shared-memory regions) passed beside them with SCM_RIGHTS. NOTE [referee
// and contestant] in worker/contestant.h.
#pragma once

#include <string>
#include <vector>

#include "common/results.h"

namespace pkb {

class ControlChannel {
 public:
  explicit ControlChannel(int fd = -1) : fd_(fd) {}
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // A connected pair: [0] stays, [1] goes to the child (not close-on-exec).
  static void make_pair(int fds[2]);

  int fd() const { return fd_; }
  void send(const Json& msg, const std::vector<int>& fds = {});
  // Waits up to timeout_ms (< 0: forever). False on timeout; throws when the
  // peer closed its end or sent something that is not a message. Received
  // fds are appended to *fds (closed when fds is null).
  bool recv(Json* msg, std::vector<int>* fds, int timeout_ms = -1);

  static constexpr size_t kMaxMessageBytes = 4 << 20;

 private:
  int fd_;
};

// The peer went away (its end closed, or it died).
struct ChannelClosed : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The peer sent something that is not a message of the protocol.
struct ChannelGarbage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace pkb
