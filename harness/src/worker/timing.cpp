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

#ifdef PKB_HAVE_CUDA
cudaStream_t current_stream(const at::Device& device) {
  return c10::cuda::getCurrentCUDAStream(device.index()).stream();
}
#endif

// Per side, over the whole run (steps 4-5).
struct Tally {
  std::vector<double> samples;
  double wall_us = 0, span_us = 0;
  int segments = 0, gate_timeouts = 0;
  bool host_sync = false;

  void add(const SegmentReport& r, int iters) {
    if (r.timed_out) ++gate_timeouts;
    samples.insert(samples.end(), r.samples.begin(), r.samples.end());
    wall_us += r.wall_us;
    span_us += r.span_us;
    ++segments;
    (void)iters;
  }
};

// Priming (step 2): a side whose segment still cannot be enqueued behind the
// gate on the second try waits for the device inside its call; it is timed
// behind the head start instead and says `host_sync`.
// The verdict is the ranks' common one (any rank timed out), through the
// store: the ranks must take the same number of priming segments, and time
// the side the same way.
bool prime(RankPeers& peers, TimedSide& side, int iters, const std::string& tag, const TimingOptions& opts) {
  if (!peers.device().is_cuda()) return false;
  // Ranks sharing a GPU: Gloo's collectives and the IPC buffers' barrier wait
  // for the device inside each call, so nothing can be enqueued behind a gate
  // (NOTE [ranks sharing a GPU]); skip the attempts, whose gates would only
  // time out.
  if (peers.shared_gpu()) return true;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string key = tag + std::to_string(attempt);
    SegmentSpec spec;
    spec.iters = iters;
    spec.tag = key;
    spec.gate_ms = opts.probe_gate_ms;
    spec.record = false;
    peers.store_barrier(key);
    spec.barrier = false;
    bool timed_out = side.segment(spec).timed_out;
    auto all = peers.exchange(key + "/timed_out", timed_out ? "1" : "0");
    if (std::find(all.begin(), all.end(), "1") == all.end()) return false;
  }
  return true;
}

TimingStats stats_of(const Tally& s, const TimingOptions& opts, const RefereeAccount* acc) {
  TimingStats st;
  std::vector<double> v = s.samples;
  st.n = static_cast<int>(v.size());
  st.host_sync = s.host_sync;
  st.gate_timeouts = s.gate_timeouts;
  if (v.empty()) return st;
  std::sort(v.begin(), v.end());
  st.mean_us = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  st.median_us = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  st.min_us = v.front();
  st.max_us = v.back();
  st.wall_us = s.wall_us / v.size();
  st.max_at = static_cast<int>(std::max_element(s.samples.begin(), s.samples.end()) - s.samples.begin());
  // Step 5 over the whole run, not per segment: one host hiccup between the
  // last enqueue and the sync would flag a short segment; hidden work shows
  // in every segment and so in the totals.
  st.anomaly = s.wall_us > opts.wall_ratio * s.span_us + opts.wall_slack_us * s.segments;
  if (acc && acc->calls > 0) {
    st.referee_wall_us = acc->wall_us / acc->calls;
    st.referee_calls = acc->calls;
    st.referee_requests = acc->requests;
    const double per_request = opts.cpu || opts.shared_gpu ? kRefereeRequestAllowanceUsCpu : kRefereeRequestAllowanceUs;
    st.referee_allowance_us =
        kRefereeCallAllowanceUs + (acc->requests * per_request + acc->host_sync_segments * kHeadStartUs) / acc->calls;
    st.referee_anomaly = st.referee_wall_us > opts.wall_ratio * st.mean_us + st.referee_allowance_us;
    st.anomaly = st.anomaly || st.referee_anomaly;
  }
  return st;
}

}  // namespace

int input_groups_for(double input_bytes, double cache_bytes) {
  if (input_bytes >= 3 * cache_bytes) return 1;
  if (input_bytes <= 0) return 2;
  double g = std::floor(3 * cache_bytes / input_bytes) + 1;
  return static_cast<int>(std::clamp(g, 2.0, 128.0));
}

double input_tensor_bytes(const Inputs& in) { return tensor_bytes(in); }

void LocalSide::prepare(const Inputs& inputs, int groups) {
  groups_.clear();
  for (int g = 0; g < groups; ++g) groups_.push_back(inputs.clone());
}

Outputs LocalSide::call() { return fn_(groups_[next_++ % groups_.size()]); }

// Ends with the device idle, so that the segment barrier after it finds
// every rank's device idle (step 3).
void LocalSide::warm(int calls) {
  for (int i = 0; i < calls; ++i) call();
  peers_.device_sync();
}

Inputs LocalSide::last_inputs() {
  PKB_CHECK(!groups_.empty(), "no input groups");
  return groups_[(next_ + groups_.size() - 1) % groups_.size()];
}

// One segment (NOTE [timing protocol], step 3): sync, store barrier, gate (or
// head start), align, `iters` calls with an event after each, open.
// Unrecorded segments are the priming ones: they run the very same code, so
// everything a timed segment does for the first time (a kernel loaded
// lazily, the allocator growing to what a fully enqueued segment keeps in
// flight, the align all-reduce's first use) happens there, not behind a timed
// gate where it stalls the host until the gate's timeout (measured: the
// first timed segment of 10 of problems 1-30 did, and read host-bound).
SegmentReport LocalSide::segment(const SegmentSpec& spec) {
  SegmentReport rep;
  peers_.device_sync();
  if (spec.barrier) peers_.store_barrier(spec.tag);
  IterationTimer timer(peers_.device(), spec.iters);
#ifdef PKB_HAVE_CUDA
  std::unique_ptr<StreamGate> gate;
  if (peers_.device().is_cuda() && !spec.host_sync) gate = std::make_unique<StreamGate>();
#endif
  auto t0 = Clock::now();
  timer.mark_start();
#ifdef PKB_HAVE_CUDA
  if (gate)
    gate->close(current_stream(peers_.device()), spec.gate_ms);
  else
#endif
    give_host_head_start(peers_.device());
  peers_.align_streams();
  timer.mark(0);
  for (int i = 0; i < spec.iters; ++i) {
    Outputs out = call();
    if (spec.record) last_ = std::move(out);
    timer.mark(i + 1);
  }
#ifdef PKB_HAVE_CUDA
  if (gate) gate->open();
#endif
  peers_.device_sync();
  rep.wall_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
#ifdef PKB_HAVE_CUDA
  rep.timed_out = gate && gate->timed_out();
#endif
  if (!spec.record) return rep;
  rep.samples = timer.durations_us();
  rep.span_us = timer.span_us();
  return rep;
}

TimingResult time_alternating(RankPeers& peers, const Inputs& inputs, TimedSide& cand, TimedSide& ref,
                              const TimingOptions& opts) {
  PKB_CHECK(opts.iters >= 1 && opts.rounds >= 1 && opts.warmup >= 0, "bad timing options");
  TimingOptions o = opts;
  o.cpu = peers.device().is_cpu();
  o.shared_gpu = peers.shared_gpu();
  TimingResult res;
  res.input_bytes = tensor_bytes(inputs);
  res.groups = input_groups_for(res.input_bytes, opts.cache_bytes);
  cand.prepare(inputs, res.groups);
  ref.prepare(inputs, res.groups);
  // Whichever side is not running is paused: a contestant is stopped while
  // the reference runs (NOTE [timing protocol], step 5).
  auto run = [&](TimedSide& side, const std::function<void()>& f) {
    TimedSide& other = &side == &cand ? ref : cand;
    other.pause();
    side.resume();
    f();
  };
  // A full warm-up of both sides first, so that no segment pays for first
  // use (module loading, allocator growth, clocks ramping up).
  for (TimedSide* s : {&cand, &ref})
    run(*s, [&] {
      peers.store_barrier(std::string("timing/warm_") + (s == &cand ? "c" : "r"));
      s->warm(opts.warmup);
    });
  const int rounds = std::min(opts.rounds, opts.iters);
  const int segment_calls = (opts.iters + rounds - 1) / rounds;
  Tally c, r;
  run(cand, [&] { c.host_sync = prime(peers, cand, segment_calls, "timing/prime_c", opts); });
  run(ref, [&] { r.host_sync = prime(peers, ref, segment_calls, "timing/prime_r", opts); });
  for (int k = 0; k < rounds; ++k) {
    // Equal shares; the first segments take the remainders.
    int iters = opts.iters / rounds + (k < opts.iters % rounds ? 1 : 0);
    int warm = opts.warmup / rounds + (k < opts.warmup % rounds ? 1 : 0);
    std::pair<TimedSide*, Tally*> order[2] = {{&cand, &c}, {&ref, &r}};
    if (k % 2) std::swap(order[0], order[1]);
    for (auto [side, tally] : order)
      run(*side, [&] {
        // The referees meet before every request of a contestant's (step
        // 5): its referee's clock then holds no wait for a slower rank.
        peers.store_barrier("timing/" + std::to_string(k) + (side == &cand ? "c" : "r") + "/warm");
        side->warm(warm);
        SegmentSpec spec;
        spec.iters = iters;
        spec.tag = "timing/" + std::to_string(k) + (side == &cand ? "c" : "r");
        spec.gate_ms = opts.segment_gate_ms;
        spec.host_sync = tally->host_sync;
        // The referees meet here, so a contestant's segment (timed by its
        // referee from request to reply) holds no wait for a slower rank.
        peers.store_barrier(spec.tag);
        spec.barrier = false;
        tally->add(side->segment(spec), iters);
      });
  }
  // The last outputs before the account closes: work a contestant deferred
  // past its last reply lands in this request's wall (step 5).
  run(cand, [&] { res.last_cand = cand.last_outputs(); });
  cand.pause();
  res.cand = stats_of(c, o, cand.account());
  res.ref = stats_of(r, o, nullptr);
  res.cand_samples = c.samples;
  res.ref_samples = r.samples;
  res.last_cand_inputs = cand.last_inputs();
  res.last_ref = ref.last_outputs();
  return res;
}

Json to_json(const TimingStats& s) {
  return Json{{"n", s.n},           {"mean_us", s.mean_us}, {"median_us", s.median_us},
              {"min_us", s.min_us}, {"max_us", s.max_us},   {"max_at", s.max_at},
              {"wall_us", s.wall_us}, {"anomaly", s.anomaly},
              {"host_sync", s.host_sync}, {"gate_timeouts", s.gate_timeouts},
              {"referee_wall_us", s.referee_wall_us < 0 ? Json(nullptr) : Json(s.referee_wall_us)},
              {"referee_allowance_us", s.referee_allowance_us}, {"referee_anomaly", s.referee_anomaly},
              {"referee_calls", s.referee_calls}, {"referee_requests", s.referee_requests}};
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
