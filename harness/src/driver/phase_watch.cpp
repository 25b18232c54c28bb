// See NOTE [phase deadlines] in phase_watch.h.
#include "driver/phase_watch.h"

#include <cstdio>
#include <cstdlib>

namespace pkb {

PhaseWatch::PhaseWatch(c10d::Store& store, int world, double setup_budget_s) : store_(store), ranks_(world) {
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
    double in_phase = std::chrono::duration<double>(now - p.since).count();
    if (p.budget_s > 0 && in_phase > p.budget_s) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "ran past its %.1f s deadline", p.budget_s);
      return "rank " + std::to_string(r) + ": phase '" + p.name + "' " + buf +
             " (deadlock or hang; NOTE [phase deadlines]); killed";
    }
  }
  return "";
}

}  // namespace pkb
