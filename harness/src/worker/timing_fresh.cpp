// See NOTE [fresh inputs] in timing_fresh.h.
#include "worker/timing_fresh.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "common/calibration.h"
#include "pkb/check.h"

namespace pkb {

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Per side: what the stopping rule (step 3) reads.
struct SideState {
  TimedSide* side;
  const char* tag;  // "c" or "r"
  Tally tally;
  std::vector<double> round_medians;  // its segment's median, per round (NOTE [paired rounds])
  double time_us = 0;  // its requests, by this referee's clock
  int warm_calls = 0;
  double last_warm_per_call = -1;
  bool warm_done = false, noise_met = false;
};

// Every rank's flags for the sides, in one exchange; a side is done only
// where every rank says so (all ranks make the same calls), and a failed
// check on any rank ends the timing on all (*failed).
void agree(RankPeers& peers, const std::string& key, bool* c, bool* r, bool* failed = nullptr) {
  const bool f = failed && *failed;
  auto all = peers.exchange(key, std::string(*c ? "1" : "0") + (*r ? "1" : "0") + (f ? "1" : "0"));
  for (const auto& v : all) {
    if (v.size() != 3 || v[0] != '1') *c = false;
    if (v.size() != 3 || v[1] != '1') *r = false;
    if (failed && (v.size() != 3 || v[2] == '1')) *failed = true;
  }
}

}  // namespace

FreshLayout fresh_layout(double call_us, double in_bytes, double out_bytes, double cache_bytes,
                         double budget_bytes) {
  FreshLayout l;
  const double per_call = call_us > 0 ? call_us : kSegmentTargetUs;
  l.segment_calls = static_cast<int>(
      std::clamp(std::round(kSegmentTargetUs / per_call), static_cast<double>(kMinSegmentCalls),
                 static_cast<double>(kMaxSegmentCalls)));
  l.groups = std::max(l.segment_calls, input_groups_for(in_bytes, cache_bytes));
  // Both sides: a group and a kept copy of its call's outputs each.
  const double per_group = 2 * (in_bytes + out_bytes);
  if (per_group > 0) {
    const int fit = static_cast<int>(std::max(1.0, std::floor(budget_bytes / per_group)));
    l.groups = std::min(l.groups, fit);
  }
  l.segment_calls = std::min(l.segment_calls, l.groups);
  return l;
}

FreshResult time_fresh(RankPeers& peers, const Inputs& inputs, TimedSide& cand, LocalSide& ref, const DrawFn& draw,
                       const CheckFn& check, const FreshTimingOptions& opts) {
  PKB_CHECK(opts.min_samples >= 1 && opts.min_rounds >= 1 && opts.max_time_s > 0 && opts.max_noise >= 0,
            "bad timing options");
  TimingOptions o = opts.base;
  o.cpu = peers.device().is_cpu();
  o.shared_gpu = peers.shared_gpu();
  o.kept_copy_us = 2 * opts.out_bytes / (o.cpu ? kKeptCopyBytesPerUsCpu : kKeptCopyBytesPerUs);
  FreshResult res;
  // A fixed input is not copied per group (NOTE [fixed inputs]): the budget
  // and the cache's rotation count the rest.
  const double in_bytes = input_tensor_bytes(without_fixed(inputs, opts.fixed));
  res.layout = fresh_layout(opts.call_us, in_bytes, opts.out_bytes, o.cache_bytes, opts.memory_budget_bytes);
  // Every rank makes the same calls: the smallest layout of any rank (each
  // sizes its own from its clock, inputs and free memory).
  {
    auto all = peers.exchange("timing/layout", std::to_string(res.layout.segment_calls) + " " +
                                                   std::to_string(res.layout.groups));
    for (const auto& v : all) {
      int s_calls = 0, groups = 0;
      PKB_CHECK(std::sscanf(v.c_str(), "%d %d", &s_calls, &groups) == 2 && s_calls >= 1 && groups >= 1,
                "a rank's timing layout is unreadable: '", v, "'");
      res.layout.segment_calls = std::min(res.layout.segment_calls, s_calls);
      res.layout.groups = std::min(res.layout.groups, groups);
    }
    res.layout.segment_calls = std::min(res.layout.segment_calls, res.layout.groups);
  }
  const int S = res.layout.segment_calls, P = res.layout.groups;
  res.timing.groups = P;
  res.timing.input_bytes = in_bytes;
  cand.prepare(inputs, P, opts.fixed);
  ref.prepare(inputs, P, opts.fixed);

  const auto loop_t0 = Clock::now();
  // Adds the time `f` takes to res.loop_s[part].
  auto account = [&](const char* part, const std::function<void()>& f) {
    auto t0 = Clock::now();
    f();
    res.loop_s[part] += us_since(t0) / 1e6;
  };
  SideState c{&cand, "c"}, r{&ref, "r"};
  // Whichever side is not running is paused: a contestant is stopped while
  // the reference runs, and while its groups are written.
  // `budget`: whether the time counts in the side's --max-time.
  auto run = [&](SideState& s, const std::function<void()>& f, bool budget = true) {
    (&s == &c ? ref : cand).pause();
    s.side->resume();
    auto t0 = Clock::now();
    f();
    if (budget) s.time_us += us_since(t0);
  };
  // Step 1: new contents for groups first .. first+n-1 (mod P), the same on
  // both sides.
  // Its cost counts in the time of the sides it serves (half each), so that
  // --max-time bounds what an evaluation spends, draws included.
  double draw_us = 0;
  auto refill = [&](int first, int n) {
    cand.pause();
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      Inputs fresh = draw(res.draws++);
      const int g = (first + i) % P;
      cand.refill(g, fresh);
      ref.refill(g, fresh);
    }
    peers.device_sync();
    const double dt = us_since(t0);
    draw_us += dt;
    res.loop_s["draws"] += dt / 1e6;
    for (SideState* s : {&c, &r}) s->time_us += dt / 2;
  };
  auto announce = [&](int calls) {
    if (opts.phase) opts.phase(calls);
  };

  // Step 3's warm-up: batches of S calls of both sides on new contents,
  // until both are stable or either has spent its share; both sides take the
  // same number of calls.
  announce(2 * S);
  for (int b = 0; !(c.warm_done && r.warm_done); ++b) {
    refill(0, S);
    bool stable = true, spent = b + 1 >= kMaxWarmBatches;
    for (SideState* s : {&c, &r}) {
      double before = s->time_us;
      account("warm-up", [&] {
        run(*s, [&] {
          peers.store_barrier("timing/warm" + std::to_string(b) + s->tag);
          s->side->warm(S, 0);
        });
      });
      const double per_call = (s->time_us - before) / S;
      s->warm_calls += S;
      stable = stable && s->last_warm_per_call > 0 &&
               std::abs(per_call - s->last_warm_per_call) <= 0.1 * s->last_warm_per_call;
      s->last_warm_per_call = per_call;
      spent = spent || s->time_us >= 0.25 * opts.max_time_s * 1e6;
    }
    c.warm_done = r.warm_done = stable || spent;
    account("agreement", [&] { agree(peers, "timing/warm" + std::to_string(b) + "/done", &c.warm_done, &r.warm_done); });
  }
  cand.open_account();  // NOTE [timing protocol], step 5

  // Step 2 of NOTE [timing protocol]: priming, on new contents, keeping
  // outputs as timed segments do (their first copies allocate here).
  SegmentSpec prime_spec;
  prime_spec.iters = S;
  prime_spec.start = 0;
  prime_spec.keep = true;
  for (SideState* s : {&c, &r}) {
    prime_spec.tag = std::string("timing/prime_") + s->tag;
    bool host_sync = false;
    auto before = [&] { refill(0, S); (s == &c ? ref : cand).pause(); s->side->resume(); };
    // Outside the side's time: a side that waits for the device inside its
    // calls spends two gate timeouts here (NOTE [timing protocol], step 3),
    // which left host_sync sides ~0.1 s of their 0.5 s for samples (H200,
    // W = 1: 69's candidate side 17 samples).
    account("priming", [&] { run(*s, [&] { host_sync = prime(peers, *s->side, prime_spec, o, before); }, false); });
    s->tally.host_sync = host_sync;
  }

  // Rounds (step 3), sides alternated C R R C as published.
  std::mt19937_64 pick(opts.pick_seed);
  bool done = false;
  for (int k = 0; k < kMaxRounds && !done; ++k) {
    announce(2 * S);
    const int first = static_cast<int>((static_cast<int64_t>(k) * S) % P);
    refill(first, S);
    SideState* order[2] = {&c, &r};
    if (k % 2) std::swap(order[0], order[1]);
    for (SideState* s : order) {
      account("segments", [&] {
        run(*s, [&] {
          SegmentSpec spec;
          spec.iters = S;
          spec.start = first;
          spec.keep = true;
          spec.tag = "timing/" + std::to_string(k) + s->tag;
          spec.gate_ms = o.segment_gate_ms;
          spec.host_sync = s->tally.host_sync;
          // The referees meet here, so a contestant's segment (timed by its
          // referee from request to reply) holds no wait for a slower rank.
          peers.store_barrier(spec.tag);
          spec.barrier = false;
          if (s == &r) settle_for_reference(peers, cand, spec.tag);
          SegmentReport seg = s->side->segment(spec);
          s->round_medians.push_back(median_of(seg.samples));
          s->tally.add(seg);
        });
      });
    }
    // Step 2: calls picked now, after the candidate replied; the reference's
    // outputs of its own segment on the same contents.
    const auto checks_t0 = Clock::now();
    if (!res.check_failed) {
      cand.pause();
      std::vector<int> positions;
      std::bernoulli_distribution coin(0.25);
      for (int i = 0; i < S; ++i)
        if (coin(pick)) positions.push_back(i);
      if (positions.empty()) positions.push_back(static_cast<int>(std::uniform_int_distribution<int>(0, S - 1)(pick)));
      std::vector<Outputs> got = cand.kept(positions);
      std::vector<Outputs> want = ref.kept(positions);
      for (size_t i = 0; i < positions.size() && !res.check_failed; ++i) {
        CompareResult cmp = check(want[i], got[i]);
        ++res.checked;
        if (cmp.outcome != Outcome::kCorrect) {
          res.check_failed = true;
          res.check_reason = "timed call " + std::to_string(positions[i]) + " of round " + std::to_string(k) +
                             " (new contents, checked after the fact): " + cmp.reason;
        }
      }
    }
    res.loop_s["checks"] += us_since(checks_t0) / 1e6;
    // The stopping rule, agreed across ranks; the sides stop together (step
    // 3: a side satisfied first keeps its segment in every round).
    bool sat_c = false, sat_r = false;
    for (SideState* s : {&c, &r}) {
      const bool enough_rounds = k + 1 >= opts.min_rounds || s->time_us >= kRoundFloorTimes * opts.max_time_s * 1e6;
      const bool floor = enough_rounds && static_cast<int>(s->tally.samples.size()) >= opts.min_samples;
      s->noise_met = floor && median_noise(s->tally.samples) <= opts.max_noise;
      (s == &c ? sat_c : sat_r) = floor && (s->noise_met || s->time_us >= opts.max_time_s * 1e6);
    }
    bool failed_any = res.check_failed;
    account("agreement", [&] { agree(peers, "timing/" + std::to_string(k) + "/done", &sat_c, &sat_r, &failed_any); });
    done = (sat_c && sat_r) || failed_any;
    res.rounds = k + 1;
  }
  // The last outputs before the account closes: work a contestant deferred
  // past its last reply lands in this request's wall (NOTE [timing
  // protocol], step 5).
  run(c, [&] { cand.last_outputs(); });
  cand.pause();

  for (SideState* s : {&c, &r}) {
    TimingStats st = stats_of(s->tally, o, s == &c ? cand.account() : nullptr);
    st.noise_met = s->noise_met;
    st.warmup_calls = s->warm_calls;
    st.time_s = s->time_us / 1e6;
    (s == &c ? res.timing.cand : res.timing.ref) = st;
  }
  res.noise_met_cand = c.noise_met;
  res.noise_met_ref = r.noise_met;
  res.round_medians_cand = c.round_medians;
  res.round_medians_ref = r.round_medians;
  res.timing.cand_samples = c.tally.samples;
  res.timing.ref_samples = r.tally.samples;
  res.timing.last_cand_inputs = cand.last_inputs();
  res.draw_us = res.draws ? draw_us / res.draws : 0;
  res.loop_s["total"] = us_since(loop_t0) / 1e6;
  return res;
}

}  // namespace pkb
