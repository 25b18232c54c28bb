// The referee/contestant transport (NOTE [referee and contestant]): what the
// untrusted side can send is checked, and what it can reach is prefixed.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "worker/control_channel.h"
#include "worker/proxy_store.h"
#include "worker/tensor_transfer.h"

namespace pkb {
namespace {

TEST(ContestantTransport, InputsRoundTripThroughARegion) {
  Inputs in;
  in.add("x", at::arange(12, at::kFloat).reshape({3, 4}).t());  // non-contiguous: strides kept
  in.add("k", int64_t{7});
  in.add("eps", 1e-5);
  in.add("none", None{});
  auto r = SharedRegion::create(region_bytes_for({in.tensor(0)}), at::kCPU);
  Inputs views;
  Json desc = place_inputs(in, *r, &views);
  // The other side maps the same memfd.
  auto other = SharedRegion::open(r->describe(), dup(r->fd()), at::kCPU);
  Inputs seen = inputs_from(desc, *other);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_TRUE(at::equal(seen.tensor(0), in.tensor(0)));
  EXPECT_EQ(seen.tensor(0).strides(), in.tensor(0).strides());
  EXPECT_EQ(seen.integer(1), 7);
  EXPECT_EQ(seen.real(2), 1e-5);
  // Same memory: a write on one side is seen on the other (the refresh in place).
  views.tensor(0).fill_(3);
  EXPECT_EQ(seen.tensor(0).sum().item<float>(), 36);
}

TEST(ContestantTransport, HostileOutputDescriptorsAreRejected) {
  auto r = SharedRegion::create(1024, at::kCPU);
  auto desc = [](int64_t offset, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
    return Json::array({Json{{"kind", "tensor"}, {"dtype", static_cast<int>(at::kFloat)}, {"sizes", sizes},
                             {"strides", strides}, {"offset", offset}}});
  };
  EXPECT_EQ(outputs_from(desc(0, {16}, {1}), *r).at(0).numel(), 16);
  EXPECT_THROW(outputs_from(desc(1000, {16}, {1}), *r), std::runtime_error);          // past the end
  EXPECT_THROW(outputs_from(desc(0, {1 << 20}, {1}), *r), std::runtime_error);        // too large
  EXPECT_THROW(outputs_from(desc(0, {4, 4}, {1LL << 40, 1}), *r), std::runtime_error);  // stride overflow
  EXPECT_THROW(outputs_from(desc(0, {-1}, {1}), *r), std::runtime_error);
  Json bad_dtype = desc(0, {4}, {1});
  bad_dtype[0]["dtype"] = 999;
  EXPECT_THROW(outputs_from(bad_dtype, *r), std::runtime_error);
  EXPECT_THROW(outputs_from(Json::object(), *r), std::runtime_error);
}

TEST(ContestantTransport, UnsealedRegionsAreRefused) {
  int fd = memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  // Its owner could shrink it under the referee's mapping (SIGBUS).
  EXPECT_ANY_THROW(SharedRegion::open(Json{{"bytes", 4096}}, fd, at::kCPU));
}

TEST(ContestantTransport, ProxyStoreKeysAreTheContestants) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  Json r = serve_store_request({{"store", "set"}, {"key", "x/t0/verdict/0"}, {"value", "636f7272656374"}}, *store);
  EXPECT_FALSE(r.contains("error"));
  EXPECT_FALSE(store->check({"x/t0/verdict/0"}));  // the referees' key is untouched
  EXPECT_TRUE(store->check({"c/x/t0/verdict/0"}));
  EXPECT_TRUE(serve_store_request({{"store", "nonsense"}}, *store).contains("error"));
  EXPECT_TRUE(serve_store_request({{"store", "set"}, {"key", "k"}, {"value", "zz"}}, *store).contains("error"));
}

TEST(ContestantTransport, GarbageOnTheChannelIsNotAMessage) {
  int fds[2];
  ControlChannel::make_pair(fds);
  ControlChannel a(fds[0]), b(fds[1]);
  const char junk[] = "{\"outcome\":\"correct\"} forged";
  ASSERT_GT(send(fds[1], junk, sizeof(junk) - 1, 0), 0);
  Json m;
  EXPECT_THROW(a.recv(&m, nullptr, 1000), ChannelGarbage);
  b.send({{"ok", true}});
  ASSERT_TRUE(a.recv(&m, nullptr, 1000));
  EXPECT_TRUE(m.value("ok", false));
  EXPECT_FALSE(a.recv(&m, nullptr, 10));  // nothing more: a timeout, not an error
}

}  // namespace
}  // namespace pkb
