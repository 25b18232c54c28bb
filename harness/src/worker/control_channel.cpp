#include "worker/control_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pkb/check.h"

namespace pkb {

ControlChannel::~ControlChannel() {
  if (fd_ >= 0) close(fd_);
}

void ControlChannel::make_pair(int fds[2]) {
  PKB_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds) == 0, "socketpair: ", strerror(errno));
  int size = static_cast<int>(kMaxMessageBytes) + 4096;
  for (int i = 0; i < 2; ++i) {
    setsockopt(fds[i], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  }
}

void ControlChannel::send(const Json& msg, const std::vector<int>& fds) {
  std::string body = msg.dump();
  PKB_CHECK(body.size() <= kMaxMessageBytes, "control message of ", body.size(), " bytes is too large");
  iovec iov{body.data(), body.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  std::vector<char> ctl;
  if (!fds.empty()) {
    ctl.resize(CMSG_SPACE(sizeof(int) * fds.size()));
    mh.msg_control = ctl.data();
    mh.msg_controllen = ctl.size();
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    ssize_t n = sendmsg(fd_, &mh, MSG_NOSIGNAL);
    if (n >= 0) return;
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET) throw ChannelClosed("the other process closed the control channel");
    PKB_CHECK(false, "sendmsg: ", strerror(errno));
  }
}

bool ControlChannel::recv(Json* msg, std::vector<int>* fds, int timeout_ms) {
  pollfd p{fd_, POLLIN, 0};
  for (;;) {
    int r = poll(&p, 1, timeout_ms);
    if (r > 0) break;
    if (r == 0) return false;
    if (errno != EINTR) PKB_CHECK(false, "poll: ", strerror(errno));
  }
  // The packet's length first, so that a small message costs a small buffer.
  ssize_t len;
  do len = ::recv(fd_, nullptr, 0, MSG_PEEK | MSG_TRUNC);
  while (len < 0 && errno == EINTR);
  if (len == 0) throw ChannelClosed("the other process closed the control channel");
  std::string body(len > 0 ? static_cast<size_t>(len) : kMaxMessageBytes, '\0');
  std::vector<char> ctl(CMSG_SPACE(sizeof(int) * 16));
  iovec iov{body.data(), body.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl.data();
  mh.msg_controllen = ctl.size();
  ssize_t n;
  do n = recvmsg(fd_, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n == 0) throw ChannelClosed("the other process closed the control channel");
  if (n < 0) {
    if (errno == ECONNRESET) throw ChannelClosed("the other process closed the control channel");
    PKB_CHECK(false, "recvmsg: ", strerror(errno));
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    std::vector<int> got(k);
    memcpy(got.data(), CMSG_DATA(c), k * sizeof(int));
    for (int f : got) {
      if (fds) fds->push_back(f);
      else close(f);
    }
  }
  if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) throw ChannelGarbage("a truncated control message");
  body.resize(static_cast<size_t>(n));
  Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw ChannelGarbage("a control message that is not a JSON object (" + std::to_string(n) + " bytes)");
  *msg = std::move(j);
  return true;
}

}  // namespace pkb
