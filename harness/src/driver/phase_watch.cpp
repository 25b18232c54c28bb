// See NOTE [phase deadlines] in phase_watch.h.
#include "driver/phase_watch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace pkb {
namespace {

std::string kind_of(const std::string& phase) {
  if (phase.rfind("trial ", 0) == 0) return "trials";
  return phase.substr(0, phase.find(':'));
}

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

PhaseWatch::PhaseWatch(c10d::Store& store, int world, double setup_budget_s, double floor_s)
    : store_(store), ranks_(world), floor_s_(floor_s) {
  auto now = std::chrono::steady_clock::now();
  for (auto& r : ranks_) {
    r.budget_s = setup_budget_s;
    r.since = now;
  }
}

std::string PhaseWatch::check() {
  auto now = std::chrono::steady_clock::now();
  for (size_t r = 0; r < ranks_.size(); ++r) {
    RankPhase& p = ranks_[r];
    const std::string key = "pkb/phase/" + std::to_string(r);
    try {
      if (store_.check({key})) {
        auto v = store_.get(key);
        std::string raw(v.begin(), v.end());
        if (raw != p.raw) {
          p.raw = raw;
          p.spent[kind_of(p.name)] += seconds_between(p.since, now);
          size_t a = raw.find('\t'), b = raw.rfind('\t');
          if (a != std::string::npos && b != a) {
            p.name = raw.substr(a + 1, b - a - 1);
            p.budget_s = std::atof(raw.c_str() + b + 1);
          }
          p.since = now;
        }
      }
    } catch (const std::exception&) {
      // A store hiccup is no verdict; the overall deadline still holds.
    }
    double in_phase = seconds_between(p.since, now);
    if (p.budget_s > 0 && in_phase > p.budget_s) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "ran past its %.1f s deadline", p.budget_s);
      // Before the reference's first timed call (trial 0's candidate) the
      // floor is all there is: a first call slower than it on a slow machine
      // (76's bf16 convolutions on a CPU without AVX-512) ends here too.
      const bool floor_alone = std::abs(p.budget_s - floor_s_) < 1e-3;
      return "rank " + std::to_string(r) + ": phase '" + p.name + "' " + buf +
             (floor_alone ? ", the phase floor alone (no reference call timed yet: a hang, or a first call slower "
                            "than the floor on this machine, which --phase-floor raises; NOTE [phase deadlines]); killed"
                          : " (deadlock or hang; NOTE [phase deadlines]); killed");
    }
  }
  return "";
}

std::map<std::string, double> PhaseWatch::seconds_by_kind(int r, double rank_seconds) const {
  const RankPhase& p = ranks_[r];
  std::map<std::string, double> out = p.spent;
  double before = 0;
  for (const auto& kv : p.spent) before += kv.second;
  out[kind_of(p.name)] += std::max(0.0, rank_seconds - before);
  return out;
}

}  // namespace pkb
