#include "driver/verdict.h"

#include <cstdio>
#include <regex>
#include <sstream>
#include <vector>

#include "driver/candidate_build.h"
#include "driver/mechanisms.h"
#include "driver/report.h"

namespace pkb {

namespace {

enum class Kind { kError, kWarning, kNote, kOther };

struct Block {
  Kind kind = Kind::kOther;
  std::vector<std::string> lines;
};

// gcc/clang "file:12:3: error: ...", nvcc "file.cu(12): error: ...", the linker.
Kind kind_of(const std::string& line) {
  static const std::regex gcc(R"(^\S[^:]*:\d+(:\d+)?: (fatal error|error|warning|note): )");
  static const std::regex nvcc(R"(^\S.*\(\d+\): (error|warning|remark)\b)");
  std::smatch m;
  if (std::regex_search(line, m, gcc)) {
    std::string w = m[2];
    return w == "note" ? Kind::kNote : w == "warning" ? Kind::kWarning : Kind::kError;
  }
  if (std::regex_search(line, m, nvcc)) return m[1] == "warning" || m[1] == "remark" ? Kind::kWarning : Kind::kError;
  if (line.find("undefined reference to") != std::string::npos || line.rfind("collect2: error", 0) == 0 ||
      line.rfind("/usr/bin/ld: ", 0) == 0 || line.rfind("nvcc fatal", 0) == 0 || line.rfind("c++: fatal error", 0) == 0)
    return Kind::kError;
  return Kind::kOther;
}

bool is_context(const std::string& line) {
  return line.rfind("In file included from ", 0) == 0 || line.rfind("                 from ", 0) == 0 ||
         line.find(": In function ") != std::string::npos ||
         line.find(": In member function ") != std::string::npos ||
         line.find(": In instantiation of ") != std::string::npos ||
         line.find(": In lambda function") != std::string::npos ||
         line.find(": At global scope:") != std::string::npos ||
         line.find("   required from ") != std::string::npos;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

std::string basename_of(const std::string& p) { return p.substr(p.find_last_of('/') + 1); }

std::string ext_of(const std::string& p) {
  size_t d = p.rfind('.');
  return d == std::string::npos ? "" : p.substr(d);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// Numbers as a person reads them: 0.015625, 3.25e-05, 1234.5.
std::string num(const Json& j) {
  if (!j.is_number()) return j.dump();
  if (j.is_number_integer()) return j.dump();
  return fmt("%.6g", j.get<double>());
}

std::string index_text(const Json& idx) {
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + idx[i].dump();
  return s + "]";
}

std::string shape_text(const Json& shape) { return shape.is_array() ? index_text(shape) : "?"; }

// At most `max` bytes, cut at a line end, saying how much was left out.
std::string clip(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = s.rfind('\n', max);
  if (cut == std::string::npos || cut < max / 2) cut = max;
  return s.substr(0, cut) + "\n... (" + std::to_string(s.size() - cut) + " more bytes)";
}

// The compiler log with the build cache's copy of the candidate named as the
// candidate itself (its lines are the candidate's lines), and the command line
// (a cached log's first line) dropped.
std::string candidate_log(const Json& r) {
  const Json& b = r["build"];
  std::string log = b.value("log", std::string());
  std::string out;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("$ ", 0) != 0) out += line + "\n";
  const std::string copy = cache_dir() + "/" + b.value("key", std::string()) + "/candidate";
  const std::string cand = r.contains("candidate") && r["candidate"].is_string() ? r["candidate"].get<std::string>() : "";
  const std::string ext = ext_of(cand);
  for (const char* e : {".cu", ".cpp"}) {
    // A raw response's code block compiles as candidate.cu/.cpp: keep that name.
    std::string shown = ext == ".cu" || ext == ".cpp" ? basename_of(cand) : "candidate" + std::string(e);
    out = replace_all(out, copy + e, shown);
  }
  return out;
}

}  // namespace

std::string trim_diagnostics(const std::string& log, size_t max_lines) {
  std::vector<Block> blocks;
  std::vector<std::string> context;
  std::vector<std::string> all;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    all.push_back(line);
    if (is_context(line)) {
      context.push_back(line);
      continue;
    }
    Kind k = kind_of(line);
    if (k == Kind::kNote && !blocks.empty() && context.empty()) {
      blocks.back().lines.push_back(line);  // a note explains the diagnostic before it
      continue;
    }
    if (k != Kind::kOther) {
      Block b;
      b.kind = k == Kind::kNote ? Kind::kOther : k;
      // Keep the innermost context: the include chain's end and the function.
      size_t from = context.size() > 3 ? context.size() - 3 : 0;
      if (from > 0) b.lines.push_back("[" + std::to_string(from) + " more lines of context]");
      for (size_t i = from; i < context.size(); ++i) b.lines.push_back(context[i]);
      context.clear();
      b.lines.push_back(line);
      blocks.push_back(std::move(b));
      continue;
    }
    if (!blocks.empty() && context.empty()) blocks.back().lines.push_back(line);  // source excerpt, caret
  }
  int errors = 0, warnings = 0;
  for (const auto& b : blocks) {
    errors += b.kind == Kind::kError;
    warnings += b.kind == Kind::kWarning;
  }
  if (errors + warnings == 0) {
    std::string out;
    for (size_t i = 0; i < all.size() && i < max_lines; ++i) out += all[i] + "\n";
    if (all.size() > max_lines) out += "... (" + std::to_string(all.size() - max_lines) + " more lines)\n";
    return out;
  }
  constexpr size_t kBlockLines = 16;  // template spam: the head of a block is what says why
  std::string out;
  size_t used = 0;
  int shown_e = 0, shown_w = 0;
  for (Kind want : {Kind::kError, Kind::kWarning}) {
    for (const auto& b : blocks) {
      if (b.kind != want) continue;
      size_t n = std::min(b.lines.size(), kBlockLines);
      if (used + n > max_lines && used > 0) continue;
      for (size_t i = 0; i < n && used < max_lines; ++i, ++used) out += b.lines[i] + "\n";
      if (n < b.lines.size()) out += "  [" + std::to_string(b.lines.size() - n) + " more lines of this diagnostic]\n";
      (want == Kind::kError ? shown_e : shown_w)++;
    }
  }
  if (shown_e < errors || shown_w < warnings)
    out += "... (" + std::to_string(errors - shown_e) + " more error(s), " + std::to_string(warnings - shown_w) +
           " more warning(s) not shown)\n";
  return out;
}

Json make_verdict(const Json& r) {
  Json v = Json::object();
  v["schema_version"] = kVerdictSchemaVersion;
  v["kind"] = "verdict";
  char label[16];
  std::snprintf(label, sizeof(label), "%02d_", r.value("problem_id", 0));
  v["problem"] = label + r.value("slug", std::string("?"));
  v["problem_id"] = r.value("problem_id", 0);
  v["category"] = r.value("category", std::string());
  v["candidate"] = r.contains("candidate") && r["candidate"].is_string() ? r["candidate"] : Json(nullptr);
  if (r.contains("step")) v["step"] = r["step"];
  const std::string outcome = r.value("outcome", std::string("harness_error"));
  v["outcome"] = outcome;
  v["correct"] = outcome == "correct";
  std::string reason = r.value("reason", std::string());
  if (outcome == "compile_error" && reason.rfind("compile failed", 0) == 0)
    reason = "compile failed (the compiler's diagnostics follow)";  // the log is in "diagnostics"
  static const std::regex empty_rank_reason(R"(^rank \d+: $)");  // a correct record's reason says nothing
  if (std::regex_match(reason, empty_rank_reason)) reason.clear();
  v["reason"] = clip(reason, 3000);
  v["deciding_rank"] = r.contains("deciding_rank") ? r["deciding_rank"] : Json(nullptr);
  v["setup"] = {{"device", r.value("device", std::string())},
                {"world_size", r.value("world_size", 0)},
                {"shared_gpu", r.value("shared_gpu", false)},
                {"base_shape", r.value("base_shape", Json::array())},
                {"trials", r.contains("args") ? r["args"].value("trials", 0) : 0},
                {"perf", r.contains("args") ? r["args"].value("perf", false) : false}};
  v["diagnostics"] = nullptr;
  if (r.contains("build") && !r["build"].value("ok", true)) {
    v["diagnostics"] = trim_diagnostics(candidate_log(r));
    v["build_log"] = cache_dir() + "/" + r["build"].value("key", std::string()) + "/build.log";
  }
  // The first differing output of each rank's each trial (a failing trial is
  // a rank's last: the ranks stop together).
  Json mism = Json::array();
  for (const auto& rank : r.value("errors", Json::array())) {
    for (const auto& t : rank.value("trials", Json::array())) {
      if (t.value("outcome", std::string("correct")) == "correct") continue;
      Json m = {{"rank", rank.value("rank", -1)}, {"trial", t.value("trial", -1)}, {"outcome", t["outcome"]}};
      bool found = false;
      for (const auto& o : t.value("outputs", Json::array())) {
        if (o.value("mismatches", 0) == 0) continue;
        m["output"] = o.value("index", 0);
        m["shape"] = o.value("shape", Json::array());
        m["dtype"] = o.value("dtype", std::string());
        m["numel"] = o.value("numel", 0);
        m["mismatches"] = o.value("mismatches", 0);
        m["max_abs_err"] = o.value("max_abs_err", 0.0);
        m["max_rel_err"] = o.value("max_rel_err", 0.0);
        if (o.contains("first_bad_index")) {
          m["index"] = o["first_bad_index"];
          m["expected"] = o.value("first_bad_expected", 0.0);
          m["got"] = o.value("first_bad_got", 0.0);
        }
        found = true;
        break;
      }
      if (!found) m["detail"] = t.value("reason", std::string());  // count, shape or dtype: in the reason
      mism.push_back(m);
    }
  }
  v["mismatches"] = mism;
  v["times"] = nullptr;
  v["speedup"] = nullptr;
  v["roofline"] = nullptr;
  if (r.contains("times")) {
    v["times"] = {{"reference_us", r["times"].value("reference_us", 0.0)},
                  {"candidate_us", r["times"].value("candidate_us", 0.0)}};
    if (r.contains("speedup")) v["speedup"] = r["speedup"];
  }
  v["speed_measured"] = speed_is_measured(r);
  if (r.contains("roofline")) v["roofline"] = r["roofline"];
  v["mechanisms"] = r.contains("mechanisms") ? r["mechanisms"] : Json(nullptr);
  v["logs"] = r.contains("logs") ? r["logs"] : Json(nullptr);
  return v;
}

std::string verdict_text(const Json& v) {
  std::ostringstream os;
  const Json& st = v["setup"];
  os << "pkb verdict: " << v.value("problem", std::string()) << ", candidate "
     << (v["candidate"].is_string() ? v["candidate"].get<std::string>() : std::string("(none)"));
  if (v.contains("step")) os << " (step " << v["step"].dump() << ")";
  os << "\n";
  os << "outcome: " << v.value("outcome", std::string()) << "\n";
  os << "setup: " << st.value("device", std::string()) << ", " << st.value("world_size", 0) << " rank(s)";
  if (st.value("shared_gpu", false)) os << " sharing GPU(s)";
  const Json& shape = st["base_shape"];
  if (shape.is_array() && shape.size() == 2) os << ", base shape " << shape[0].dump() << "x" << shape[1].dump();
  os << ", " << st.value("trials", 0) << " trial(s)" << (st.value("perf", false) ? ", timed" : ", not timed")
     << "\n";
  const std::string reason = v.value("reason", std::string());
  if (!v.value("correct", false) && !reason.empty()) os << "reason: " << reason << "\n";
  if (v["diagnostics"].is_string()) {
    os << "\ncompiler diagnostics (trimmed";
    if (v.contains("build_log")) os << "; whole log: " << v["build_log"].get<std::string>();
    os << "):\n" << v["diagnostics"].get<std::string>();
  }
  if (!v["mismatches"].empty()) {
    os << "\nfirst mismatching output per rank and trial:\n";
    for (const auto& m : v["mismatches"]) {
      os << "  rank " << m.value("rank", -1) << ", trial " << m.value("trial", -1) << ": ";
      if (!m.contains("output")) {
        os << m.value("outcome", std::string()) << ": " << m.value("detail", std::string()) << "\n";
        continue;
      }
      os << "output " << m.value("output", 0) << " (shape " << shape_text(m["shape"]) << ", "
         << m.value("dtype", std::string()) << "): " << m.value("mismatches", 0) << " of " << m.value("numel", 0)
         << " elements differ";
      if (m.contains("index"))
        os << "; first at " << index_text(m["index"]) << ": expected " << num(m["expected"]) << ", got "
           << num(m["got"]);
      os << "; max abs err " << num(m["max_abs_err"]) << ", max rel err " << num(m["max_rel_err"]) << "\n";
    }
  }
  if (v["times"].is_object()) {
    os << "\ntimes (slowest rank's median per call): reference "
       << format_us(v["times"].value("reference_us", 0.0)) << ", candidate "
       << format_us(v["times"].value("candidate_us", 0.0)) << "\n";
    if (v["speedup"].is_number()) {
      os << "speedup: " << fmt("%.3fx", v["speedup"].get<double>());
      if (!v.value("speed_measured", false))
        os << " (timed on CPU or with ranks sharing a GPU: not a speed result; scores leave it out of fast_p)";
      os << "\n";
    }
  }
  if (v["roofline"].is_object()) {
    const Json& rf = v["roofline"];
    os << "roofline: T_roof " << format_us(rf.value("t_roof_us", 0.0)) << " (" << rf.value("bound", std::string())
       << "-bound); candidate at " << fmt("%.3f", rf.value("candidate_fraction", 0.0)) << " of it, reference at "
       << fmt("%.3f", rf.value("reference_fraction", 0.0)) << "\n";
  }
  if (v["mechanisms"].is_array()) {
    os << "mechanisms (static, from the shared object):";
    if (v["mechanisms"].empty()) os << " none";
    for (const auto& m : v["mechanisms"])
      os << "\n  " << m.value("name", std::string()) << ": " << m.value("evidence", std::string());
    os << "\n";
  }
  if (v["logs"].is_string()) os << "rank logs: " << v["logs"].get<std::string>() << "\n";
  return os.str();
}

}  // namespace pkb
