#include "worker/output_digest.h"

#include <string>

#include "common/sha256.h"

namespace pkb {

std::string output_digest(const Outputs& outs) {
  std::string data;
  for (const at::Tensor& t : outs) {
    if (!t.defined()) {
      data += "undefined;";
      continue;
    }
    data += c10::toString(t.scalar_type());
    data += '[';
    for (int64_t s : t.sizes()) data += std::to_string(s) + ',';
    data += "]:";
    // Detached, so that an output that requires grad is read as its values.
    at::Tensor host = t.detach().to(at::kCPU).contiguous();
    const size_t bytes = static_cast<size_t>(host.numel()) * host.element_size();
    if (bytes) data.append(static_cast<const char*>(host.data_ptr()), bytes);
    data += ';';
  }
  return sha256_hex(data);
}

}  // namespace pkb
