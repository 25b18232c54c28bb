#include "driver/report.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "common/memory_record.h"
#include "driver/mechanisms.h"

namespace pkb {

std::string format_us(double us) {
  char buf[32];
  if (us >= 1e6) std::snprintf(buf, sizeof(buf), "%.2f s", us / 1e6);
  else if (us >= 1e3) std::snprintf(buf, sizeof(buf), "%.1f ms", us / 1e3);
  else std::snprintf(buf, sizeof(buf), "%.1f us", us);
  return buf;
}

namespace {

std::string fmt(const char* f, double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string one_line(std::string s, size_t max = 100) {
  for (auto& c : s)
    if (c == '\n' || c == '|') c = ' ';
  return s.size() > max ? s.substr(0, max - 3) + "..." : s;
}

// After a speedup whose times do not measure the GPU path (speed_is_measured()).
constexpr const char* kUnmeasuredMark = "†";

std::string label(const Json& r) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%02d_", r.value("problem_id", 0));
  return buf + r.value("slug", std::string("?"));
}

}  // namespace

void Progress::finished(const Json& r) {
  ++done_;
  double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  double eta = done_ < total_ ? el / done_ * (total_ - done_) : 0;
  std::ostringstream os;
  os << "[" << done_ << "/" << total_ << "] " << label(r);
  if (r.value("sample", 0) > 0) os << " #" << r.value("sample", 0);
  os << "  " << r.value("outcome", std::string("?"));
  if (r.contains("speedup") && r["speedup"].is_number())
    os << "  " << fmt("%.2fx", r["speedup"].get<double>()) << (speed_is_measured(r) ? "" : kUnmeasuredMark);
  if (r.contains("roofline") && r["roofline"].contains("candidate_fraction") &&
      r["roofline"]["candidate_fraction"].is_number())
    os << "  " << fmt("%.2f roof", r["roofline"]["candidate_fraction"].get<double>());
  if (r.value("outcome", std::string()) != "correct" && r.contains("reason"))
    os << "  (" << one_line(r.value("reason", std::string()), 120) << ")";
  if (eta > 0) os << "  ETA " << static_cast<int>(eta) / 60 << ":" << fmt("%02.0f", static_cast<int>(eta) % 60 * 1.0);
  std::fprintf(stderr, "%s\n", os.str().c_str());
}

void Progress::note(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

std::string summary_markdown(const std::vector<Json>& records, const std::vector<std::string>& skipped) {
  std::ostringstream os;
  os << "| problem | sample | outcome | reference | candidate | speedup | roof ref | roof cand | mechanisms "
        "| reason |\n";
  os << "|---|---:|---|---:|---:|---:|---:|---:|---|---|\n";
  std::map<std::string, int> counts;
  bool unmeasured = false;
  for (const auto& r : records) {
    std::string outcome = r.value("outcome", std::string("?"));
    ++counts[outcome];
    auto num = [&](const Json& j, const char* key, const char* f) -> std::string {
      return j.contains(key) && j[key].is_number() ? fmt(f, j[key].get<double>()) : "";
    };
    std::string ref_t, cand_t;
    if (r.contains("times")) {
      const Json& t = r["times"];
      if (t.contains("reference_us") && t["reference_us"].is_number()) ref_t = format_us(t["reference_us"].get<double>());
      if (t.contains("candidate_us") && t["candidate_us"].is_number()) cand_t = format_us(t["candidate_us"].get<double>());
    }
    Json roof = r.value("roofline", Json::object());
    const std::string mark = speed_is_measured(r) ? "" : kUnmeasuredMark;
    unmeasured |= !mark.empty() && r.contains("speedup");
    os << "| " << label(r) << " | " << r.value("sample", 0) << " | " << outcome << " | " << ref_t << " | " << cand_t
       << " | " << num(r, "speedup", "%.2fx") << (r.contains("speedup") ? mark : "") << " | "
       << num(roof, "reference_fraction", "%.2f") << " | " << num(roof, "candidate_fraction", "%.2f") << " | " << mechanisms_brief(r.value("mechanisms", Json()))
       << " | " << (outcome == "correct" ? "" : one_line(r.value("reason", std::string()))) << " |\n";
  }
  for (const auto& s : skipped) os << "| " << one_line(s, 60) << " | | skipped | | | | | | | |\n";
  os << "\n" << records.size() << " evaluations:";
  bool first = true;
  for (const auto& [k, v] : counts) {
    os << (first ? " " : ", ") << v << " " << k;
    first = false;
  }
  if (!skipped.empty()) os << "; " << skipped.size() << " skipped";
  os << "\n";
  // NOTE [memory record]: the largest rank's peak, host and device.
  const Json* host_max = nullptr;
  const Json* dev_max = nullptr;
  for (const auto& r : records) {
    if (record_host_peak_bytes(r) > 0 && (!host_max || record_host_peak_bytes(r) > record_host_peak_bytes(*host_max)))
      host_max = &r;
    if (record_device_peak_bytes(r) > 0 &&
        (!dev_max || record_device_peak_bytes(r) > record_device_peak_bytes(*dev_max)))
      dev_max = &r;
  }
  if (host_max)
    os << "\nlargest memory peak of one rank: " << format_bytes(record_host_peak_bytes(*host_max)) << " resident ("
       << label(*host_max) << ", W=" << host_max->value("world_size", 0) << ")";
  if (dev_max)
    os << (host_max ? "; " : "\nlargest memory peak of one rank: ") << format_bytes(record_device_peak_bytes(*dev_max))
       << " on the GPU (" << label(*dev_max) << ", caching allocator, reserved)";
  if (host_max || dev_max) os << "\n";
  if (unmeasured)
    os << "\n" << kUnmeasuredMark
       << " timed on CPU or with ranks sharing a GPU: the times do not measure NVLink, so the speedup is no speed "
          "result (pkb score leaves it out of fast_p)\n";
  bool any_mechanisms = false;
  for (const auto& r : records) any_mechanisms |= r.contains("mechanisms");
  if (any_mechanisms)
    os << "\nmechanisms (static, from the .so; evidence in each record): ce copy engine (cudaMemcpy* imported), "
          "ldst SM loads/stores, tma TMA bulk copies, nvls NVLink SHARP multimem, ? not read\n";
  return os.str();
}

}  // namespace pkb
