// A kernel that holds a stream until the host opens it (NOTE [timing protocol],
// step 3): the host enqueues a whole timed segment behind the closed gate, so
// the GPU runs it back to back and per-iteration events measure the GPU, not
// the host's launch rate. nvbench's blocking kernel does the same.
//
// The gate opens by itself after a timeout, so a call that waits for the
// device inside the timed region (a host sync, a blocking copy, a full launch
// queue) cannot deadlock behind it; timed_out() tells the caller that the
// segment was not fully enqueued when it started.
#pragma once

#include <cstdint>

#ifdef PKB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace pkb {

#ifdef PKB_HAVE_CUDA
class StreamGate {
 public:
  StreamGate();
  ~StreamGate();
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  // Enqueues the closed gate on `stream`; the stream stays held until open()
  // or until `timeout_ms` have passed on the GPU.
  void close(cudaStream_t stream, double timeout_ms);
  void open();
  // After the stream has passed the gate: whether it opened by its timeout.
  bool timed_out() const;

 private:
  volatile int32_t* host_ = nullptr;  // [0]: open flag (host writes), [1]: timed out (device writes)
  int32_t* device_ = nullptr;
};
#endif

}  // namespace pkb
