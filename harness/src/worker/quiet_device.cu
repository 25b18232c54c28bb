// See NOTE [quiet device] in quiet_device.h.
#include "worker/quiet_device.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "pkb/check.h"

namespace pkb {

namespace {

using Clock = std::chrono::steady_clock;

// Nothing to compute: the probe measures when the device lets it run.
__global__ void quiet_probe_kernel() {}

}  // namespace

QuietDevice::QuietDevice() {
  int dev = 0;
  PKB_CUDA_CHECK(cudaGetDevice(&dev));
  PKB_CUDA_CHECK(cudaDeviceGetAttribute(&blocks_, cudaDevAttrMultiProcessorCount, dev));
  blocks_ = std::max(blocks_, 1);
  PKB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

QuietDevice::~QuietDevice() {
  if (stream_) cudaStreamDestroy(stream_);
}

double QuietDevice::probe_us() {
  const auto t0 = Clock::now();
  quiet_probe_kernel<<<blocks_, 32, 0, stream_>>>();
  PKB_CUDA_CHECK(cudaGetLastError());
  PKB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

void QuietDevice::calibrate() {
  probe_us();  // the module's first launch loads it
  std::vector<double> v;
  for (int i = 0; i < kQuietBaselineProbes; ++i) v.push_back(probe_us());
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  baseline_us_ = v[v.size() / 2];
  threshold_us_ = std::max(kQuietFactor * baseline_us_, kQuietFloorUs);
}

QuietWait QuietDevice::wait(double deadline_us) {
  QuietWait w;
  const auto t0 = Clock::now();
  int quiet_in_row = 0;
  for (;;) {
    const double us = probe_us();
    w.max_probe_us = std::max(w.max_probe_us, us);
    if (us <= threshold_us_) {
      ++quiet_in_row;
    } else {
      quiet_in_row = 0;
      w.busy_seen = true;
    }
    w.waited_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (quiet_in_row >= 2) return w;
    if (w.waited_us >= deadline_us) {
      w.quiet = false;
      return w;
    }
  }
}

}  // namespace pkb
