// SHA-256 (FIPS 180-4) through OpenSSL's libcrypto, fed in pieces, as
// lower-case hex. For identifying prompts in generation manifests and the
// reference outputs' fingerprints (NOTE [reference fingerprints]); nothing
// secret. libcrypto rather than our own rounds: it uses the CPU's SHA
// instructions where they exist, about 10x faster over the hundreds of MB a
// large output holds.
#pragma once

#include <cstddef>
#include <string>

struct evp_md_ctx_st;

namespace pkb {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t bytes);
  void update(const std::string& s) { update(s.data(), s.size()); }
  // The digest of everything fed so far; the object is spent afterwards.
  std::string hex();

 private:
  evp_md_ctx_st* ctx_;
};

std::string sha256_hex(const std::string& data);

}  // namespace pkb
