// NOTE [quiet device]
// A contestant is stopped (SIGSTOP, with everything it started) while the
// reference is timed, so no candidate thread can slow the reference from the
// host (NOTE [timing protocol], step 5). A stop does not reach the GPU: work
// the candidate had enqueued runs on, and so does work a process it started
// (a context of its own, which the contestant's own device sync never waits
// for) had enqueued. Beside the reference's timed calls it would slow them
// and flatter the candidate's speedup.
//
// So before each of the reference's timed segments, once every rank's
// referee has stopped its contestant and met the others, each referee makes
// sure the device is quiet. Contexts of different processes time-slice the
// GPU (no MPS here): a kernel of ours waits, from launch to completion by the
// host's clock, for whatever slice another context holds. The probe is such a
// kernel (one block per SM, doing nothing); the device is quiet when two
// probes in a row come back within the threshold: kQuietFactor times the
// baseline probe, or kQuietFloorUs, whichever is more. The baseline is
// measured when the contestant is set up and no candidate is loaded yet, by
// every rank at once. The floor is there because the baseline alone does
// not hold: an honest contestant's context, just idle,
// costs the first probe after it a context switch (W = 1 on an H200: baseline
// 10 us, probes after an honest candidate's segments up to 204 us), and ranks
// sharing a GPU do not always overlap their baseline probes as they do later
// (one shared-GPU evaluation measured 10 us, then probed at 320-335 us: a
// false timing_anomaly at a threshold of 260 us, then max(4 x baseline,
// baseline + 250 us)). A busy device costs a probe a time slice, ~2 ms here,
// twice the floor.
//
// Ranks sharing a GPU meet again after the probes: a rank's segment beside
// another's probes made them read busy (measured on an H200, W = 2 sharing,
// honest candidates: up to 7 of 31 settles a rank, probes of 1.9-2.3 ms).
//
// Measured there (gpu.attacks): the baseline probe is 274 us with two ranks
// probing side by side (threshold 1.1 ms); beside the hog of attack sample
// 14 (another process's queued kernels) probes take up to 2.5 ms, one time
// slice, and the device stays busy to the deadline.
//
// A device not quiet at once is waited for, up to kQuietDeadlineUs; the wait
// counts in the contestant's account (its referee's clock), because it is
// the candidate's work deferred past its reply. A device still busy at the
// deadline ends the candidate's timing as `timing_anomaly`; later segments
// probe once and do not wait again.
//
// What this does not see: work queued behind a wait on memory that nothing
// running could release (no kernel is resident), and a busy device that is
// another user's (an honest candidate on a shared machine then reads as an
// anomaly: its times would be no better than the reference's).
#pragma once

#ifdef PKB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace pkb {

inline constexpr double kQuietFactor = 4.0;
inline constexpr double kQuietFloorUs = 1000;
inline constexpr double kQuietDeadlineUs = 1e6;
inline constexpr int kQuietBaselineProbes = 16;

struct QuietWait {
  bool quiet = true;
  bool busy_seen = false;  // some probe was over the threshold
  double waited_us = 0;    // from the first probe to the last
  double max_probe_us = 0;
};

#ifdef PKB_HAVE_CUDA
class QuietDevice {
 public:
  // On the current device.
  QuietDevice();
  ~QuietDevice();
  QuietDevice(const QuietDevice&) = delete;
  QuietDevice& operator=(const QuietDevice&) = delete;

  // The median of kQuietBaselineProbes probes; sets the threshold.
  void calibrate();
  // Probes until two in a row are within the threshold or `deadline_us` has passed.
  QuietWait wait(double deadline_us);
  double baseline_us() const { return baseline_us_; }
  double threshold_us() const { return threshold_us_; }

 private:
  // The host's clock from one probe's launch to its completion.
  double probe_us();
  cudaStream_t stream_ = nullptr;
  int blocks_ = 1;
  double baseline_us_ = 0, threshold_us_ = 0;
};
#endif

}  // namespace pkb
