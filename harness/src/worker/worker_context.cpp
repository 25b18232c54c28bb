#include "worker/worker_context.h"

#ifdef PKB_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "pkb/check.h"
#include "worker/route_guard.h"
#include "worker/symmetric.h"

namespace pkb {

void* WorkerContext::stream() const {
#ifdef PKB_HAVE_CUDA
  if (dist_.device().is_cuda()) return c10::cuda::getCurrentCUDAStream(dist_.device().index()).stream();
#endif
  return nullptr;
}

SymmetricBuffer& WorkerContext::symmetric(const std::string& name, size_t bytes) {
  auto it = buffers_.find(name);
  if (it != buffers_.end()) {
    PKB_CHECK(it->second->size_bytes() >= bytes, "symmetric buffer '", name, "' exists with ",
              it->second->size_bytes(), " bytes; asked for ", bytes);
    return *it->second;
  }
  PKB_CHECK(bytes > 0, "symmetric buffer '", name, "' of zero bytes");
  std::unique_ptr<SymmetricBuffer> buf;
  CandidateRoutes::Exposed exposed;  // the rendezvous resolves the group by name
#ifdef PKB_HAVE_CUDA
  if (dist_.device().is_cuda())
    buf = dist_.shared_gpu() ? make_ipc_symmetric(dist_, name, bytes) : make_cuda_symmetric(dist_, name, bytes);
#endif
  if (!buf) buf = make_host_symmetric(dist_, name, bytes);
  return *buffers_.emplace(name, std::move(buf)).first->second;
}

}  // namespace pkb
