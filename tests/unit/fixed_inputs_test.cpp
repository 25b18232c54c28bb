// NOTE [fixed inputs]: the copies that leave fixed tensors out, the chunked
// bitwise comparison, the checksum that holds a reference to its
// declaration, and a timing side's groups sharing a fixed tensor.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "pkb/fixed_inputs.h"
#include "worker/fixed_inputs.h"
#include "worker/integrity.h"
#include "worker/timing.h"

namespace pkb {
namespace {

Inputs sample() {
  Inputs in;
  in.add("table", at::randn({64, 8}));
  in.add("ids", at::arange(5, at::kLong));
  in.add("n", int64_t{64});
  return in;
}

TEST(FixedInputs, CloneLeavesFixedTensorsShared) {
  Inputs in = sample();
  Inputs c = clone_but_fixed(in, {0});
  EXPECT_TRUE(c.tensor(0).is_same(in.tensor(0)));
  EXPECT_FALSE(c.tensor(1).is_same(in.tensor(1)));
  EXPECT_TRUE(at::equal(c.tensor(1), in.tensor(1)));
  EXPECT_EQ(c.integer(2), 64);
  EXPECT_FALSE(clone_but_fixed(in, {}).tensor(0).is_same(in.tensor(0)));
  EXPECT_FALSE(without_fixed(in, {0}).tensor(0).defined());
  EXPECT_TRUE(without_fixed(in, {0}).tensor(1).defined());
  EXPECT_FALSE(only_fixed(in, {0}).tensor(1).defined());
  EXPECT_TRUE(only_fixed(in, {0}).tensor(0).is_same(in.tensor(0)));
  EXPECT_DOUBLE_EQ(input_tensor_bytes(without_fixed(in, {0})), 5.0 * 8);
}

TEST(FixedInputs, SameBitsInChunks) {
  at::Tensor a = at::randn({1000});
  at::Tensor b = a.clone();
  EXPECT_TRUE(same_bits(a, b, 64));
  b[999] = b[999].item<float>() + 1;  // in the last chunk of 64 bytes
  EXPECT_FALSE(same_bits(a, b, 64));
  EXPECT_FALSE(same_bits(a, b));
  at::Tensor z = at::zeros({3}), nz = -at::zeros({3});
  EXPECT_FALSE(same_bits(z, nz, 4));  // signed zeros differ in their bits
}

TEST(FixedInputs, ChecksumSeesAWriteAndASwap) {
  for (int64_t n : {int64_t{4096 * 5}, int64_t{4096 * 5 + 7}}) {
    at::Tensor a = at::randn({n});
    const auto sum = content_checksum(a);
    EXPECT_EQ(content_checksum(a.clone()), sum);
    at::Tensor w = a.clone();
    w[n - 1] = 0.5f;  // the tail where n is not a multiple of 4096
    EXPECT_NE(content_checksum(w), sum) << n;
    at::Tensor s = a.clone();  // two elements swapped, other row and column
    s[10] = a[4096 * 3 + 77];
    s[4096 * 3 + 77] = a[10];
    EXPECT_NE(content_checksum(s), sum) << n;
  }
  at::Tensor bytes = at::randint(0, 255, {4097 * 3}, at::kByte);  // not whole int32 words
  const auto sum = content_checksum(bytes);
  at::Tensor b = bytes.clone();
  b[5] = static_cast<uint8_t>((b[5].item<uint8_t>() + 1) % 256);
  EXPECT_NE(content_checksum(b), sum);
}

TEST(FixedInputs, ReasonsNameTheInput) {
  Inputs in = sample();
  auto before = fixed_checksums(in, {0});
  EXPECT_EQ(fixed_written(in, {0}, before, fixed_checksums(in, {0})), "");
  const_cast<at::Tensor&>(in.tensor(0))[0][0] = 123.0f;
  std::string why = fixed_written(in, {0}, before, fixed_checksums(in, {0}));
  EXPECT_NE(why.find("'table'"), std::string::npos) << why;
  Inputs copy = clone_but_fixed(in, {});
  EXPECT_EQ(changed_fixed(in, copy, {0}, "while timed"), "");
  const_cast<at::Tensor&>(copy.tensor(0))[1][1] = 7.0f;
  why = changed_fixed(in, copy, {0}, "while timed");
  EXPECT_NE(why.find("'table'"), std::string::npos) << why;
  EXPECT_NE(why.find("while timed"), std::string::npos) << why;
}

TEST(FixedInputs, WorldDrawKeyIsTheSameOnEveryRank) {
  auto key = [](int rank, int trial) {
    InputRequest req;
    req.rank = rank;
    req.seed = integrity_seed_for(68, rank, trial);
    return world_draw_key(req);
  };
  for (int trial : {0, 1, 1000, 1 << 29}) {
    for (int rank = 1; rank < 8; ++rank) EXPECT_EQ(key(rank, trial), key(0, trial)) << rank << " " << trial;
    EXPECT_NE(key(0, trial), key(0, trial + 1));
  }
}

class OneRank final : public RankPeers {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  at::Device device() const override { return at::kCPU; }
  bool shared_gpu() const override { return false; }
  c10d::Store& store() override { return *store_; }
  c10::intrusive_ptr<c10d::Store> store_ptr() override { return store_; }
  void align_streams() override {}

 private:
  c10::intrusive_ptr<c10d::Store> store_ = c10::make_intrusive<c10d::HashStore>();
};

TEST(FixedInputs, LocalSideGroupsShareTheFixedTensor) {
  OneRank peers;
  std::vector<const void*> seen;
  at::Tensor last_ids;
  LocalSide side(peers, [&](const Inputs& in) {
    seen.push_back(in.tensor(0).data_ptr());
    last_ids = in.tensor(1).clone();
    return Outputs{in.tensor(1) * 2};
  });
  Inputs in = sample();
  side.prepare(in, 3, {0});
  side.warm(3, 0);
  ASSERT_EQ(seen.size(), 3u);
  for (const void* p : seen) EXPECT_EQ(p, in.tensor(0).data_ptr());
  // New contents keep the fixed tensor; the rest lands in the group's storage.
  Inputs fresh;
  fresh.add("table", in.tensor(0));
  fresh.add("ids", at::arange(10, 15, at::kLong));
  fresh.add("n", int64_t{64});
  side.refill(1, fresh);
  side.warm(1, 1);  // one call on group 1
  EXPECT_EQ(seen.back(), in.tensor(0).data_ptr());
  EXPECT_TRUE(at::equal(last_ids, at::arange(10, 15, at::kLong)));
  // Contents that would replace it are refused (nothing copied into it).
  Inputs other = fresh;
  other = with_arg(fresh, 0, at::randn({64, 8}));
  EXPECT_THROW(side.refill(1, other), std::exception);
}

}  // namespace
}  // namespace pkb
