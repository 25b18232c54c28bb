#include "worker/peers.h"

#ifdef PKB_HAVE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace pkb {

void RankPeers::publish(const std::string& key, const std::string& value) {
  store().set("x/" + key + "/" + std::to_string(rank()), std::vector<uint8_t>(value.begin(), value.end()));
}

std::vector<std::string> RankPeers::exchange(const std::string& key, const std::string& value) {
  publish(key, value);
  std::vector<std::string> out(world());
  for (int r = 0; r < world(); ++r) {
    auto v = store().get("x/" + key + "/" + std::to_string(r));
    out[r].assign(v.begin(), v.end());
  }
  return out;
}

void RankPeers::store_barrier(const std::string& key) { exchange("barrier/" + key, ""); }

void RankPeers::device_sync() const {
#ifdef PKB_HAVE_CUDA
  if (device().is_cuda()) c10::cuda::device_synchronize();
#endif
}

}  // namespace pkb
