// CPU mode's stand-in for symmetric memory: one POSIX shared-memory segment per
// rank and buffer, mapped by every rank. Rank r creates its own segment,
// publishes its name through the store, and every rank maps every segment.
// Names are unlinked as soon as all ranks have mapped them, so a crashed run
// leaves nothing in /dev/shm.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "pkb/check.h"
#include "worker/symmetric.h"

namespace pkb {

namespace {

class HostSymmetricBuffer final : public SymmetricBuffer {
 public:
  HostSymmetricBuffer(RankPeers& dist, const std::string& name, size_t bytes)
      : dist_(dist), name_(name), bytes_(bytes) {
    static std::atomic<int> counter{0};
    const int world = dist.world(), rank = dist.rank();
    // Every rank must ask for the same buffer at the same point.
    std::string mine = name + "#" + std::to_string(bytes);
    auto all = dist.exchange("symm/" + name + "/shape", mine);
    for (int r = 0; r < world; ++r)
      PKB_CHECK(all[r] == mine, "symmetric buffer mismatch: rank ", rank, " asked for '", mine, "', rank ", r,
                " for '", all[r], "'");
    map_bytes_ = bytes + kSignalPadBytes;
    std::string shm_name = "/pkb." + std::to_string(getpid()) + "." + std::to_string(counter++);
    int fd = shm_open(shm_name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    PKB_CHECK(fd >= 0, "shm_open(", shm_name, "): ", strerror(errno));
    PKB_CHECK(ftruncate(fd, static_cast<off_t>(map_bytes_)) == 0, "ftruncate: ", strerror(errno));
    close(fd);
    auto names = dist.exchange("symm/" + name + "/names", shm_name);
    ptrs_.resize(world);
    pads_.resize(world);
    for (int r = 0; r < world; ++r) {
      int f = shm_open(names[r].c_str(), O_RDWR, 0600);
      PKB_CHECK(f >= 0, "shm_open(", names[r], ") of rank ", r, ": ", strerror(errno));
      void* p = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
      close(f);
      PKB_CHECK(p != MAP_FAILED, "mmap of rank ", r, "'s buffer: ", strerror(errno));
      ptrs_[r] = p;
      pads_[r] = static_cast<char*>(p) + bytes;
    }
    dist.store_barrier("symm/" + name + "/mapped");
    shm_unlink(shm_name.c_str());
  }

  ~HostSymmetricBuffer() override {
    for (void* p : ptrs_) munmap(p, map_bytes_);
  }

  size_t size_bytes() const override { return bytes_; }
  void* ptr() override { return ptrs_[dist_.rank()]; }
  void* peer_ptr(int rank) override {
    PKB_CHECK(rank >= 0 && rank < dist_.world(), "peer rank ", rank, " out of range");
    return ptrs_[rank];
  }
  void* const* peer_ptrs_host() override { return ptrs_.data(); }
  void* const* peer_ptrs_device() override { return nullptr; }
  void* const* signal_pads_host() override { return pads_.data(); }
  void* const* signal_pads_device() override { return nullptr; }
  size_t signal_pad_bytes() const override { return kSignalPadBytes; }
  void* multicast_ptr() override { return nullptr; }
  void barrier(int channel) override {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    dist_.store_barrier("symm/" + name_ + "/b" + std::to_string(channel) + "/" + std::to_string(generation_++));
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

 private:
  RankPeers& dist_;
  std::string name_;
  size_t bytes_ = 0, map_bytes_ = 0;
  std::vector<void*> ptrs_, pads_;
  uint64_t generation_ = 0;
};

}  // namespace

std::unique_ptr<SymmetricBuffer> make_host_symmetric(RankPeers& dist, const std::string& name, size_t bytes) {
  return std::make_unique<HostSymmetricBuffer>(dist, name, bytes);
}

}  // namespace pkb
