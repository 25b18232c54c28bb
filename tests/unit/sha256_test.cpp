#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "common/sha256.h"
#include "worker/output_digest.h"

namespace pkb {
namespace {

// FIPS 180-4 examples, and a message that spans blocks with padding in a block of its own.
TEST(Sha256, KnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000, 'a')), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

// Fed in pieces that split blocks anywhere, the digest is the whole message's.
TEST(Sha256, PiecesAreTheWhole) {
  std::string msg;
  for (int i = 0; i < 1000; ++i) msg += static_cast<char>((i * 131 + 7) & 0xff);
  for (size_t cut : {size_t{0}, size_t{1}, size_t{55}, size_t{64}, size_t{999}}) {
    Sha256 h;
    h.update(msg.data(), cut);
    h.update(msg.data() + cut, msg.size() - cut);
    EXPECT_EQ(h.hex(), sha256_hex(msg)) << "cut at " << cut;
  }
}

// NOTE [reference fingerprints]: the digest is sha256 over "dtype[sizes,]:"
// and the row-major bytes of each output, then ";" (the committed fingerprint
// tables depend on exactly this), whatever the output's strides, and over
// outputs larger than one piece of the host copy.
TEST(OutputDigest, DtypeSizesAndRowMajorBytes) {
  at::Tensor a = at::arange(12, at::kFloat).reshape({3, 4});
  std::string msg = "Float[3,4,]:";
  msg.append(static_cast<const char*>(a.data_ptr()), 12 * sizeof(float));
  msg += ";undefined;";
  EXPECT_EQ(output_digest({a, at::Tensor()}), sha256_hex(msg));
  // Transposed twice: the same values, other strides.
  at::Tensor strided = a.t().contiguous().t();
  ASSERT_FALSE(strided.is_contiguous());
  EXPECT_EQ(output_digest({strided, at::Tensor()}), sha256_hex(msg));
  // One element changed, another digest.
  at::Tensor b = a.clone();
  b[1][2] = 100.f;
  EXPECT_NE(output_digest({b, at::Tensor()}), sha256_hex(msg));

  const int64_t n = (int64_t{65} << 20) + 3;  // over one 64 MiB piece
  at::Tensor big = at::randint(0, 256, {n}, at::kByte);
  std::string bmsg = "Byte[" + std::to_string(n) + ",]:";
  bmsg.append(static_cast<const char*>(big.data_ptr()), static_cast<size_t>(n));
  bmsg += ";";
  EXPECT_EQ(output_digest({big}), sha256_hex(bmsg));
}

}  // namespace
}  // namespace pkb
