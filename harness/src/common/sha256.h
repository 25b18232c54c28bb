// SHA-256 (FIPS 180-4) of a byte string, as lower-case hex. For identifying
// prompts in generation manifests; not for anything secret.
#pragma once

#include <string>

namespace pkb {

std::string sha256_hex(const std::string& data);

}  // namespace pkb
