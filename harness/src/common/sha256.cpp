#include "common/sha256.h"

#include <openssl/evp.h>

#include "common/hex.h"
#include "pkb/check.h"

namespace pkb {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  PKB_CHECK(ctx_ != nullptr, "EVP_MD_CTX_new failed");
  PKB_CHECK(EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1, "EVP_DigestInit_ex(sha256) failed");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(const void* data, size_t bytes) {
  if (bytes) PKB_CHECK(EVP_DigestUpdate(ctx_, data, bytes) == 1, "EVP_DigestUpdate failed");
}

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  PKB_CHECK(EVP_DigestFinal_ex(ctx_, md, &len) == 1 && len == 32, "EVP_DigestFinal_ex failed");
  return to_hex(md, len);
}

std::string sha256_hex(const std::string& data) {
  Sha256 h;
  h.update(data);
  return h.hex();
}

}  // namespace pkb
