// See NOTE [timing protocol] in timing.h.
#include "worker/timing.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <cmath>
#include <limits>
#include <numeric>

#ifdef PKB_HAVE_CUDA
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#endif

#include "common/calibration.h"
#include "pkb/check.h"
#include "worker/stream_gate.h"
#include "worker/timing_fresh.h"

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

// Per-call timer: CUDA events on the current stream, or the host clock. Marks:
// the segment's start (before the gate), then each call's begin and end. Not
// split, a call's end is the next one's begin (calls back to back); split,
// each has its own, so that untimed work between calls (copying outputs
// aside: NOTE [fresh inputs]) stays out of every sample.
class IterationTimer {
 public:
  IterationTimer(const at::Device& device, int n, bool split)
      : cuda_(device.is_cuda()), n_(n), split_(split), count_(split ? 2 * n + 1 : n + 2) {
#ifdef PKB_HAVE_CUDA
    if (cuda_) {
      events_.resize(count_);
      for (auto& e : events_) PKB_CUDA_CHECK(cudaEventCreate(&e));
      stream_ = c10::cuda::getCurrentCUDAStream(device.index()).stream();
    }
#endif
    host_.resize(count_);
  }
  ~IterationTimer() {
#ifdef PKB_HAVE_CUDA
    for (auto& e : events_) cudaEventDestroy(e);
#endif
  }
  // Marked before anything of the segment is enqueued.
  void mark_start() { mark(0); }
  void mark_begin(int i) {
    if (split_ || i == 0) mark(begin_at(i));
  }
  void mark_end(int i) { mark(end_at(i)); }
  // From mark_start() to the last call's end: what the host wall clock should see.
  double span_us() const { return elapsed_us(0, end_at(n_ - 1)); }
  std::vector<double> durations_us() const {
    std::vector<double> out(n_);
    for (int i = 0; i < n_; ++i) out[i] = elapsed_us(begin_at(i), end_at(i));
    return out;
  }

 private:
  int begin_at(int i) const { return split_ ? 1 + 2 * i : 1 + i; }
  int end_at(int i) const { return split_ ? 2 + 2 * i : 2 + i; }
  void mark(int k) {
#ifdef PKB_HAVE_CUDA
    if (cuda_) {
      PKB_CUDA_CHECK(cudaEventRecord(events_[k], stream_));
      return;
    }
#endif
    host_[k] = Clock::now();
  }
  double elapsed_us(int a, int b) const {
#ifdef PKB_HAVE_CUDA
    if (cuda_) {
      float ms = 0;
      PKB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[a], events_[b]));
      return ms * 1e3;
    }
#endif
    return std::chrono::duration<double, std::micro>(host_[b] - host_[a]).count();
  }

  bool cuda_;
  int n_;
  bool split_;
  int count_;
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

}  // namespace

void Tally::add(const SegmentReport& r) {
  if (r.timed_out) ++gate_timeouts;
  samples.insert(samples.end(), r.samples.begin(), r.samples.end());
  wall_us += r.wall_us;
  span_us += r.span_us;
  ++segments;
}

// Priming (step 2): a side whose segment still cannot be enqueued behind the
// gate on the second try waits for the device inside its call; it is timed
// behind the head start instead and says `host_sync`.
// The verdict is the ranks' common one (any rank timed out), through the
// store: the ranks must take the same number of priming segments, and time
// the side the same way.
bool prime(RankPeers& peers, TimedSide& side, SegmentSpec spec, const TimingOptions& opts,
           const std::function<void()>& before_attempt) {
  if (!peers.device().is_cuda()) return false;
  // Ranks sharing a GPU: Gloo's collectives and the IPC buffers' barrier wait
  // for the device inside each call, so nothing can be enqueued behind a gate
  // (NOTE [ranks sharing a GPU]); skip the attempts, whose gates would only
  // time out.
  if (peers.shared_gpu()) return true;
  const std::string tag = spec.tag;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string key = tag + std::to_string(attempt);
    if (before_attempt) before_attempt();
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

void settle_for_reference(RankPeers& peers, TimedSide& cand, const std::string& tag) {
  cand.settle();
  // Ranks sharing a GPU: a rank that settled first would start its segment
  // beside another's probes, which would find the device busy with it.
  if (peers.shared_gpu()) peers.store_barrier(tag + "/settled");
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
  st.median_us = median_of_sorted(v);
  st.min_us = v.front();
  st.max_us = v.back();
  st.wall_us = s.wall_us / v.size();
  st.max_at = static_cast<int>(std::max_element(s.samples.begin(), s.samples.end()) - s.samples.begin());
  st.noise = median_noise(v);
  st.segments = s.segments;
  // Step 5 over the whole run, not per segment: one host hiccup between the
  // last enqueue and the sync would flag a short segment; hidden work shows
  // in every segment and so in the totals.
  st.anomaly = s.wall_us > opts.wall_ratio * s.span_us + opts.wall_slack_us * s.segments;
  if (acc && acc->calls > 0) {
    st.referee_wall_us = acc->wall_us / acc->calls;
    st.referee_calls = acc->calls;
    st.referee_requests = acc->requests;
    const double per_request = opts.cpu || opts.shared_gpu ? kRefereeRequestAllowanceUsCpu : kRefereeRequestAllowanceUs;
    st.referee_allowance_us = kRefereeCallAllowanceUs + opts.kept_copy_us +
                              (acc->requests * per_request + acc->host_sync_segments * kHeadStartUs) / acc->calls;
    st.referee_anomaly = st.referee_wall_us > opts.wall_ratio * st.mean_us + st.referee_allowance_us;
  }
  if (acc) {
    st.device_settles = acc->settles;
    st.device_busy_settles = acc->busy_settles;
    st.device_settle_wait_us = acc->settle_wait_us;
    st.device_max_probe_us = acc->max_probe_us;
    st.device_left_busy = acc->left_busy;
    st.referee_anomaly = st.referee_anomaly || acc->left_busy;
  }
  st.anomaly = st.anomaly || st.referee_anomaly;
  return st;
}

double median_noise(std::vector<double> v) {
  const size_t n = v.size();
  if (n < 2) return std::numeric_limits<double>::infinity();
  std::sort(v.begin(), v.end());
  const double med = median_of_sorted(v);
  // Ranks of the distribution-free interval: the number of samples below the
  // median is Binomial(n, 1/2), so n/2 -+ 1.96 * sqrt(n) / 2.
  // 1-based: floor(n/2 - h) and ceil(1 + n/2 + h).
  const double h = 0.98 * std::sqrt(static_cast<double>(n));
  const auto lo = static_cast<size_t>(std::max(0.0, std::floor(0.5 * n - h) - 1));
  const auto hi = static_cast<size_t>(std::min(static_cast<double>(n - 1), std::ceil(1 + 0.5 * n + h) - 1));
  if (med <= 0) return v[hi] > v[lo] ? std::numeric_limits<double>::infinity() : 0.0;
  return (v[hi] - v[lo]) / (2 * med);
}

int input_groups_for(double input_bytes, double cache_bytes) {
  if (input_bytes >= 3 * cache_bytes) return 1;
  if (input_bytes <= 0) return 2;
  double g = std::floor(3 * cache_bytes / input_bytes) + 1;
  return static_cast<int>(std::clamp(g, 2.0, 128.0));
}

double input_tensor_bytes(const Inputs& in) { return tensor_bytes(in); }

double output_tensor_bytes(const Outputs& out) {
  double b = 0;
  for (const auto& t : out)
    if (t.defined()) b += static_cast<double>(t.nbytes());
  return b;
}

void LocalSide::prepare(const Inputs& inputs, int groups, const FixedSet& fixed) {
  groups_.clear();
  fixed_ = fixed;
  for (int g = 0; g < groups; ++g) groups_.push_back(clone_but_fixed(inputs, fixed));
}

Outputs LocalSide::call() { return fn_(groups_[next_++ % groups_.size()]); }

// Ends with the device idle, so that the segment barrier after it finds
// every rank's device idle (step 3).
void LocalSide::warm(int calls, int start) {
  if (start >= 0) next_ = static_cast<size_t>(start);
  for (int i = 0; i < calls; ++i) call();
  peers_.device_sync();
}

void LocalSide::refill(int g, const Inputs& contents) {
  PKB_CHECK(g >= 0 && g < static_cast<int>(groups_.size()), "no input group ", g);
  Inputs& dst = groups_[g];
  // In place where every tensor keeps its shape (the storage, and so the
  // pointers, of the group stay); otherwise the new contents replace it.
  bool same = dst.size() == contents.size();
  for (size_t i = 0; same && i < dst.size(); ++i) {
    const auto* a = std::get_if<at::Tensor>(&dst.args()[i].value);
    const auto* b = std::get_if<at::Tensor>(&contents.args()[i].value);
    if (!a || !b) {
      same = !a && !b;
      continue;
    }
    same = a->defined() == b->defined() &&
           (!a->defined() || (a->sizes() == b->sizes() && a->dtype() == b->dtype() && a->is_contiguous()));
    if (is_fixed(fixed_, i))
      PKB_CHECK(a->is_same(*b), "new contents for group ", g, " replace fixed input ", i, " (NOTE [fixed inputs])");
  }
  if (!same) {
    dst = contents.clone();
    return;
  }
  Inputs fresh;
  for (size_t i = 0; i < dst.size(); ++i) {
    const auto& a = dst.args()[i];
    if (auto t = std::get_if<at::Tensor>(&a.value)) {
      if (t->defined() && !is_fixed(fixed_, i)) t->copy_(std::get<at::Tensor>(contents.args()[i].value));
      fresh.add(a.name, *t);
    } else {
      fresh.add(a.name, contents.args()[i].value);  // scalars may vary too
    }
  }
  dst = std::move(fresh);
}

// A copy in storage kept from the last segment where the shapes allow: after
// the first keep-segment (the priming one) nothing is allocated here.
void LocalSide::keep(size_t i, const Outputs& out) {
  if (kept_.size() <= i) kept_.resize(i + 1);
  Outputs& k = kept_[i];
  bool reuse = k.size() == out.size();
  for (size_t j = 0; reuse && j < out.size(); ++j)
    reuse = k[j].defined() == out[j].defined() &&
            (!out[j].defined() || (k[j].sizes() == out[j].sizes() && k[j].dtype() == out[j].dtype() &&
                                   k[j].device() == out[j].device()));
  if (!reuse) {
    k.assign(out.size(), at::Tensor());
    for (size_t j = 0; j < out.size(); ++j)
      if (out[j].defined()) k[j] = at::empty_like(out[j], at::MemoryFormat::Contiguous);
  }
  for (size_t j = 0; j < out.size(); ++j)
    if (out[j].defined()) k[j].copy_(out[j]);
}

std::vector<Outputs> LocalSide::kept(const std::vector<int>& positions) {
  std::vector<Outputs> out;
  for (int p : positions) {
    PKB_CHECK(p >= 0 && p < static_cast<int>(kept_.size()), "no kept call ", p);
    out.push_back(kept_[p]);
  }
  return out;
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
  if (spec.start >= 0) next_ = static_cast<size_t>(spec.start);
  if (spec.keep && kept_.size() > static_cast<size_t>(spec.iters)) kept_.resize(spec.iters);
  peers_.device_sync();
  if (spec.barrier) peers_.store_barrier(spec.tag);
  IterationTimer timer(peers_.device(), spec.iters, spec.keep);
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
  for (int i = 0; i < spec.iters; ++i) {
    timer.mark_begin(i);
    Outputs out = call();
    timer.mark_end(i);
    if (spec.keep) keep(i, out);
    if (spec.record) last_ = std::move(out);
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
                              const TimingOptions& opts, const FixedSet& fixed) {
  PKB_CHECK(opts.iters >= 1 && opts.rounds >= 1 && opts.warmup >= 0, "bad timing options");
  TimingOptions o = opts;
  o.cpu = peers.device().is_cpu();
  o.shared_gpu = peers.shared_gpu();
  TimingResult res;
  res.input_bytes = tensor_bytes(inputs);
  res.groups = input_groups_for(res.input_bytes, opts.cache_bytes);
  // One group per side (one input set exceeds 3x the cache): the fixed
  // tensors need no copy of their own; otherwise every group is a deep copy.
  const FixedSet shared = res.groups == 1 ? fixed : FixedSet{};
  cand.prepare(inputs, res.groups, shared);
  ref.prepare(inputs, res.groups, shared);
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
  cand.open_account();  // NOTE [timing protocol], step 5
  const int rounds = std::min(opts.rounds, opts.iters);
  const int segment_calls = (opts.iters + rounds - 1) / rounds;
  Tally c, r;
  SegmentSpec prime_spec;
  prime_spec.iters = segment_calls;
  prime_spec.tag = "timing/prime_c";
  run(cand, [&] { c.host_sync = prime(peers, cand, prime_spec, opts); });
  prime_spec.tag = "timing/prime_r";
  run(ref, [&] { r.host_sync = prime(peers, ref, prime_spec, opts); });
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
        if (side == &ref) settle_for_reference(peers, cand, spec.tag);
        tally->add(side->segment(spec));
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
              {"referee_calls", s.referee_calls}, {"referee_requests", s.referee_requests},
              {"noise", std::isfinite(s.noise) && s.noise >= 0 ? Json(s.noise) : Json(nullptr)},
              {"noise_met", s.noise_met}, {"segments", s.segments}, {"warmup_calls", s.warmup_calls},
              {"time_s", s.time_s},
              {"device_settles", s.device_settles}, {"device_busy_settles", s.device_busy_settles},
              {"device_settle_wait_us", s.device_settle_wait_us}, {"device_max_probe_us", s.device_max_probe_us},
              {"device_left_busy", s.device_left_busy}};
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
