// Bytes as lowercase hex and back: CUDA IPC handles through the store, and
// binary store values through the contestant's JSON channel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pkb {

std::string to_hex(const void* p, size_t n);
inline std::string to_hex(const std::vector<uint8_t>& v) { return to_hex(v.data(), v.size()); }
// Throws (PKB_CHECK) on an odd length or a digit that is not [0-9a-f]: the
// text may come from an untrusted process.
std::vector<uint8_t> from_hex(const std::string& s);
// Exactly n bytes into p.
void from_hex(const std::string& s, void* p, size_t n);

}  // namespace pkb
