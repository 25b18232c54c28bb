// See NOTE [timing protocol] in timing.h.
#include "worker/timing.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>

#ifdef PKB_HAVE_CUDA
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#endif

#include "pkb/check.h"
#include "worker/stream_gate.h"

namespace pkb {

namespace {

using Clock = std::chrono::steady_clock;

double tensor_bytes(const Inputs& in) {
  double b = 0;
  for (const auto& a : in.args())
    if (auto t = std::get_if<at::Tensor>(&a.value))
      if (t->defined()) b += static_cast<double>(t->nbytes());
  return b;
}

// Per-iteration timer: CUDA events on the current stream, or the host clock.
class IterationTimer {
 public:
  IterationTimer(const at::Device& device, int n) : cuda_(device.is_cuda()), n_(n) {
#ifdef PKB_HAVE_CUDA
    if (cuda_) {
      events_.resize(n + 2);  // [0, n]: iterations; [n + 1]: before the head start
      for (auto& e : events_) PKB_CUDA_CHECK(cudaEventCreate(&e));
      stream_ = c10::cuda::getCurrentCUDAStream(device.index()).stream();
    }
#endif
    host_.resize(n + 2);
  }
  ~IterationTimer() {
#ifdef PKB_HAVE_CUDA
    for (auto& e : events_) cudaEventDestroy(e);
#endif
  }
  void mark(int i) {
#ifdef PKB_HAVE_CUDA
    if (cuda_) {
      PKB_CUDA_CHECK(cudaEventRecord(events_[i], stream_));
      return;
    }
#endif
    host_[i] = Clock::now();
  }
  // Marked before anything of the segment is enqueued.
  void mark_start() { mark(n_ + 1); }
  // From mark_start() to the last iteration: what the host wall clock should see.
  double span_us() const {
#ifdef PKB_HAVE_CUDA
    if (cuda_) {
      float ms = 0;
      PKB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[n_ + 1], events_[n_]));
      return ms * 1e3;
    }
#endif
    return std::chrono::duration<double, std::micro>(host_[n_] - host_[n_ + 1]).count();
  }
  std::vector<double> durations_us() const {
    std::vector<double> out(n_);
#ifdef PKB_HAVE_CUDA
    if (cuda_) {
      for (int i = 0; i < n_; ++i) {
        float ms = 0;
        PKB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
        out[i] = ms * 1e3;
      }
      return out;
    }
#endif
    for (int i = 0; i < n_; ++i) out[i] = std::chrono::duration<double, std::micro>(host_[i + 1] - host_[i]).count();
    return out;
  }

 private:
  bool cuda_;
  int n_;
  std::vector<Clock::time_point> host_;
#ifdef PKB_HAVE_CUDA
  std::vector<cudaEvent_t> events_;
  cudaStream_t stream_ = nullptr;
#endif
};

// Holds the stream for a couple of milliseconds so that the host is already
// ahead, enqueueing timed iterations, when the first one starts. The fallback
// for a side that waits for the device inside its call (no gate can be used).
void give_host_head_start(const at::Device& device) {
#ifdef PKB_HAVE_CUDA
  if (!device.is_cuda()) return;
  constexpr int64_t kHeadStartMs = 2;
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device.index()) != cudaSuccess || khz <= 0) khz = 2000000;
  at::cuda::sleep(static_cast<int64_t>(khz) * kHeadStartMs);
#endif
}

struct Side {
  const TimedFn* fn;
  std::vector<Inputs> groups;
  size_t next = 0;
  std::vector<double> samples;
  double wall_us = 0;
  bool anomaly = false;
  bool host_syncs = false;  // its call waited for the device while the stream was gated
  int gate_timeouts = 0;
  double span_us = 0;       // events, from before the gate to the last call, summed over segments
  int segments = 0;
  Outputs last;

  // The next input group in the rotation (NOTE [timing protocol], step 1).
  Outputs call() { return (*fn)(groups[next++ % groups.size()]); }
};

#ifdef PKB_HAVE_CUDA
cudaStream_t current_stream(const at::Device& device) {
  return c10::cuda::getCurrentCUDAStream(device.index()).stream();
}
#endif

// One segment (NOTE [timing protocol], steps 2-3): re-warm, sync, store
// barrier, gate (or head start), align, `iters` calls with an event after each,
// open. Returns whether the gate opened by its timeout. Unrecorded segments
// are the priming ones: they run the very same code, so everything a timed
// segment does for the first time (a kernel loaded lazily, the allocator
// growing to what a fully enqueued segment keeps in flight, the align
// all-reduce's first use) happens there, not behind a timed gate where it
// stalls the host until the gate's timeout (measured: the first timed segment
// of 10 of problems 1-30 did, and read host-bound).
bool run_segment(Distributed& dist, Side& side, int warmup, int iters, const std::string& tag,
                 double gate_ms, bool record) {
  for (int i = 0; i < warmup; ++i) side.call();
  dist.device_sync();
  dist.store_barrier(tag);
  IterationTimer timer(dist.device(), iters);
#ifdef PKB_HAVE_CUDA
  std::unique_ptr<StreamGate> gate;
  if (dist.device().is_cuda() && !side.host_syncs) gate = std::make_unique<StreamGate>();
#endif
  auto t0 = Clock::now();
  timer.mark_start();
#ifdef PKB_HAVE_CUDA
  if (gate)
    gate->close(current_stream(dist.device()), gate_ms);
  else
#endif
    give_host_head_start(dist.device());
  dist.align_streams();
  timer.mark(0);
  for (int i = 0; i < iters; ++i) {
    Outputs out = side.call();
    if (record) side.last = std::move(out);
    timer.mark(i + 1);
  }
#ifdef PKB_HAVE_CUDA
  if (gate) gate->open();
#endif
  dist.device_sync();
  double wall = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  bool timed_out = false;
#ifdef PKB_HAVE_CUDA
  timed_out = gate && gate->timed_out();
#endif
  if (!record) return timed_out;
  if (timed_out) ++side.gate_timeouts;
  auto d = timer.durations_us();
  side.wall_us += wall;
  side.span_us += timer.span_us();
  ++side.segments;
  side.samples.insert(side.samples.end(), d.begin(), d.end());
  return timed_out;
}

// Priming (step 2): a side whose segment still cannot be enqueued behind the
// gate on the second try waits for the device inside its call; it is timed
// behind the head start instead and says `host_sync`.
// The verdict is the ranks' common one (any rank timed out), through the
// store: the ranks must take the same number of priming segments, and time
// the side the same way.
void prime(Distributed& dist, Side& side, int iters, const std::string& tag, const TimingOptions& opts) {
  if (!dist.device().is_cuda()) return;
  // Ranks sharing a GPU: Gloo's collectives and the IPC buffers' barrier wait
  // for the device inside each call, so nothing can be enqueued behind a gate
  // (NOTE [ranks sharing a GPU]); skip the attempts, whose gates would only
  // time out.
  if (dist.shared_gpu()) {
    side.host_syncs = true;
    return;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string key = tag + std::to_string(attempt);
    bool timed_out = run_segment(dist, side, 0, iters, key, opts.probe_gate_ms, false);
    auto all = dist.exchange(key + "/timed_out", timed_out ? "1" : "0");
    if (std::find(all.begin(), all.end(), "1") == all.end()) return;
  }
  side.host_syncs = true;
}

TimingStats stats_of(const Side& s) {
  TimingStats st;
  std::vector<double> v = s.samples;
  st.n = static_cast<int>(v.size());
  if (v.empty()) return st;
  std::sort(v.begin(), v.end());
  st.mean_us = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  st.median_us = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  st.min_us = v.front();
  st.max_us = v.back();
  st.wall_us = s.wall_us / v.size();
  st.anomaly = s.anomaly;
  st.host_sync = s.host_syncs;
  st.gate_timeouts = s.gate_timeouts;
  st.max_at = static_cast<int>(std::max_element(s.samples.begin(), s.samples.end()) - s.samples.begin());
  return st;
}

}  // namespace

int input_groups_for(double input_bytes, double cache_bytes) {
  if (input_bytes >= 3 * cache_bytes) return 1;
  if (input_bytes <= 0) return 2;
  double g = std::floor(3 * cache_bytes / input_bytes) + 1;
  return static_cast<int>(std::clamp(g, 2.0, 128.0));
}

TimingResult time_alternating(Distributed& dist, const Inputs& inputs, const TimedFn& cand, const TimedFn& ref,
                              const TimingOptions& opts) {
  PKB_CHECK(opts.iters >= 1 && opts.rounds >= 1 && opts.warmup >= 0, "bad timing options");
  TimingResult res;
  res.input_bytes = tensor_bytes(inputs);
  res.groups = input_groups_for(res.input_bytes, opts.cache_bytes);
  Side c{&cand}, r{&ref};
  for (int g = 0; g < res.groups; ++g) {
    c.groups.push_back(inputs.clone());
    r.groups.push_back(inputs.clone());
  }
  // A full warm-up of both sides first, so that no segment pays for first
  // use (module loading, allocator growth, clocks ramping up).
  for (Side* s : {&c, &r})
    for (int i = 0; i < opts.warmup; ++i) s->call();
  const int rounds = std::min(opts.rounds, opts.iters);
  const int segment_calls = (opts.iters + rounds - 1) / rounds;
  prime(dist, c, segment_calls, "timing/prime_c", opts);
  prime(dist, r, segment_calls, "timing/prime_r", opts);
  for (int k = 0; k < rounds; ++k) {
    // Equal shares; the first segments take the remainders.
    int iters = opts.iters / rounds + (k < opts.iters % rounds ? 1 : 0);
    int warm = opts.warmup / rounds + (k < opts.warmup % rounds ? 1 : 0);
    Side* order[2] = {&c, &r};
    if (k % 2) std::swap(order[0], order[1]);
    for (Side* s : order)
      run_segment(dist, *s, warm, iters, "timing/" + std::to_string(k) + (s == &c ? "c" : "r"),
                  opts.segment_gate_ms, true);
  }
  // Step 5 over the whole run, not per segment: one host hiccup between the
  // last enqueue and the sync would flag a short segment; hidden work shows
  // in every segment and so in the totals.
  for (Side* s : {&c, &r})
    s->anomaly = s->wall_us > opts.wall_ratio * s->span_us + opts.wall_slack_us * s->segments;
  res.cand = stats_of(c);
  res.ref = stats_of(r);
  res.cand_samples = c.samples;
  res.ref_samples = r.samples;
  res.last_cand = std::move(c.last);
  res.last_cand_inputs = c.groups[(c.next + c.groups.size() - 1) % c.groups.size()];
  res.last_ref = std::move(r.last);
  return res;
}

Json to_json(const TimingStats& s) {
  return Json{{"n", s.n},           {"mean_us", s.mean_us}, {"median_us", s.median_us},
              {"min_us", s.min_us}, {"max_us", s.max_us},   {"max_at", s.max_at},
              {"wall_us", s.wall_us}, {"anomaly", s.anomaly},
              {"host_sync", s.host_sync}, {"gate_timeouts", s.gate_timeouts}};
}

double cache_bytes_for(const at::Device& device) {
#ifdef PKB_HAVE_CUDA
  if (device.is_cuda()) {
    int l2 = 0;
    if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device.index()) == cudaSuccess && l2 > 0) return l2;
    return 50.0 * (1 << 20);
  }
#endif
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) return static_cast<double>(l3);
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? static_cast<double>(l2) : 32.0 * (1 << 20);
}

}  // namespace pkb
