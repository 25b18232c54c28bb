#include "worker/output_digest.h"

#include <algorithm>
#include <string>

#include "common/sha256.h"
#include "worker/integrity.h"

namespace pkb {

namespace {

// Device outputs reach the host a piece at a time: a 300 MB output (77's at
// W = 1) never needs a second full copy on the host.
constexpr int64_t kDigestChunkBytes = int64_t{64} << 20;

}  // namespace

std::string output_digest(const Outputs& outs) {
  Sha256 h;
  for (const at::Tensor& t : outs) {
    if (!t.defined()) {
      h.update("undefined;");
      continue;
    }
    std::string head = c10::toString(t.scalar_type());
    head += '[';
    for (int64_t s : t.sizes()) head += std::to_string(s) + ',';
    head += "]:";
    h.update(head);
    // Detached, so that an output that requires grad is read as its values.
    at::Tensor bytes = flat_bytes(t.detach().resolve_conj().resolve_neg());
    const int64_t n = bytes.numel();
    for (int64_t off = 0; off < n; off += kDigestChunkBytes) {
      at::Tensor piece = bytes.narrow(0, off, std::min(kDigestChunkBytes, n - off));
      if (!piece.is_cpu()) piece = piece.to(at::kCPU);
      h.update(piece.data_ptr(), static_cast<size_t>(piece.numel()));
    }
    h.update(";");
  }
  return h.hex();
}

}  // namespace pkb
