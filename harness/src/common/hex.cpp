#include "common/hex.h"

#include <cstring>

#include "pkb/check.h"

namespace pkb {

std::string to_hex(const void* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<const unsigned char*>(p)[i];
    s[2 * i] = d[c >> 4];
    s[2 * i + 1] = d[c & 15];
  }
  return s;
}

std::vector<uint8_t> from_hex(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  PKB_CHECK(s.size() % 2 == 0, "odd hex length");
  std::vector<uint8_t> v(s.size() / 2);
  for (size_t i = 0; i < v.size(); ++i) {
    int a = val(s[2 * i]), b = val(s[2 * i + 1]);
    PKB_CHECK(a >= 0 && b >= 0, "bad hex digit");
    v[i] = static_cast<uint8_t>(a * 16 + b);
  }
  return v;
}

void from_hex(const std::string& s, void* p, size_t n) {
  PKB_CHECK(s.size() == 2 * n, "bad handle of ", s.size(), " hex digits (", 2 * n, " expected)");
  std::vector<uint8_t> v = from_hex(s);
  std::memcpy(p, v.data(), n);
}

}  // namespace pkb
