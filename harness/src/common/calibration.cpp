// See NOTE [calibrated roofline] in calibration.h.
#include "common/calibration.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>

#include "pkb/check.h"

namespace pkb {

namespace {

std::vector<std::string> topology_names(const std::string& source_dir) {
  std::vector<std::string> names;
  DIR* d = opendir((source_dir + "/topology").c_str());
  if (!d) return names;
  while (dirent* e = readdir(d)) {
    std::string f = e->d_name;
    if (f.size() > 5 && f.substr(f.size() - 5) == ".json") names.push_back(f.substr(0, f.size() - 5));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

Json read_json(const std::string& path) {
  std::ifstream f(path);
  PKB_CHECK(f.good(), "no topology file '", path, "'");
  Json j = Json::parse(f, nullptr, false);
  PKB_CHECK(!j.is_discarded() && j.is_object(), "topology file '", path, "' is not a JSON object");
  return j;
}

std::string topology_path(const std::string& name_or_path, const std::string& source_dir) {
  if (name_or_path.find('/') == std::string::npos && name_or_path.find(".json") == std::string::npos)
    return source_dir + "/topology/" + name_or_path + ".json";
  return name_or_path;
}

double num(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

// The best (largest) "rate" among `tests` that `keep` accepts; 0 when none.
double best_rate(const Json& tests, const std::function<bool(const Json&)>& keep) {
  double best = 0;
  if (!tests.is_array()) return 0;
  for (const auto& t : tests)
    if (keep(t) && !t.contains("error")) best = std::max(best, num(t, "rate"));
  return best;
}

std::vector<double> positive(const std::vector<double>& v) {
  std::vector<double> out;
  for (double x : v)
    if (x > 0) out.push_back(x);
  return out;
}

// A rate entry of the calibrated file: measured (median over `values`), or
// the datasheet's value with `why` when nothing was measured.
Json rate_entry(const std::vector<double>& per_gpu, double datasheet, const std::string& unit,
                const std::string& method, const std::string& why_not) {
  std::vector<double> got = positive(per_gpu);
  Json e;
  if (!got.empty()) {
    e["value"] = median_of(got);
    e["source"] = "measured";
  } else {
    e["value"] = datasheet;
    e["source"] = datasheet > 0 ? "datasheet" : "absent";
    e["reason"] = why_not.empty() ? "not measured" : why_not;
  }
  e["unit"] = unit;
  e["method"] = method;
  e["per_gpu"] = per_gpu;
  if (datasheet > 0) {
    e["datasheet"] = datasheet;
    if (!got.empty()) e["of_datasheet"] = e["value"].get<double>() / datasheet;
  }
  return e;
}

std::string errors_of(const std::vector<Json>& ranks, const char* part) {
  std::string why;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const Json& p = ranks[r].value(part, Json::object());
    std::string e = p.is_object() ? p.value("error", p.value("skipped", std::string())) : std::string();
    if (!e.empty()) why += (why.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": " + e);
  }
  return why;
}

const char* kNvlinkMechanisms[] = {"sm_load", "sm_store", "copy_engine"};

bool in_mechanism(const Json& t, const std::string& mech) {
  std::string m = t.value("mechanism", "");
  return mech == "copy_engine" ? (m == "ce_pull" || m == "ce_push") : m == mech;
}

const char* nvlink_method(const std::string& mech) {
  if (mech == "sm_load") return "a copy kernel on this GPU loading from the peer's symmetric buffer (pkb symmetric memory) and storing locally; best over grid sizes; per GPU, both directions loaded (every GPU reads from its peer at once); median over GPUs and peers";
  if (mech == "sm_store") return "a copy kernel on this GPU loading locally and storing into the peer's symmetric buffer; best over grid sizes; both directions loaded; median over GPUs and peers";
  return "cudaMemcpyAsync between this GPU's buffer and the peer's peer-mapped symmetric buffer (the copy engine), best of pull and push; both directions loaded; median over GPUs and peers";
}

std::string fmt_rate(double v, const std::string& unit) {
  char b[64];
  if (v <= 0) return "-";
  if (unit == "FLOP/s") std::snprintf(b, sizeof(b), "%.0f TFLOP/s", v / 1e12);
  else if (v >= 1e12) std::snprintf(b, sizeof(b), "%.2f TB/s", v / 1e12);
  else std::snprintf(b, sizeof(b), "%.1f GB/s", v / 1e9);
  return b;
}

std::string fmt_num(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "-";
  char b[64];
  std::snprintf(b, sizeof(b), "%.2f", j[key].get<double>());
  return b;
}

// One padded cell: `s` right-aligned in `width` (left-aligned when negative).
std::string cell(const std::string& s, int width) {
  size_t w = static_cast<size_t>(width < 0 ? -width : width);
  if (s.size() >= w) return s;
  return width < 0 ? s + std::string(w - s.size(), ' ') : std::string(w - s.size(), ' ') + s;
}

}  // namespace

std::string calibration_summary(const Json& t) {
  std::string out = cell("rate", -34) + cell("value", 14) + cell("datasheet", 14) + cell("of ds", 8) + "  source\n";
  const Json rates = t.value("rates", Json::object());
  auto row = [&](const std::string& label, const char* key) {
    if (!rates.contains(key)) return;
    const Json& e = rates[key];
    std::string unit = e.value("unit", "B/s");
    std::string src = e.value("source", "?");
    if (e.contains("mechanism")) src += " (" + e["mechanism"].get<std::string>() + ")";
    if (e.contains("reason")) src += ": " + e["reason"].get<std::string>();
    out += cell(label, -34) + cell(fmt_rate(e.value("value", 0.0), unit), 14) +
           cell(fmt_rate(e.value("datasheet", 0.0), unit), 14) + cell(fmt_num(e, "of_datasheet"), 8) + "  " + src + "\n";
    if (e.contains("one_direction"))
      out += cell("    one direction only", -34) + cell(fmt_rate(e["one_direction"].get<double>(), unit), 14) + "\n";
  };
  row("NVLink per direction (roofline)", "nvlink_bw_per_dir");
  row("  by SM loads", "nvlink_sm_load_bw_per_dir");
  row("  by SM stores", "nvlink_sm_store_bw_per_dir");
  row("  by the copy engine", "nvlink_copy_engine_bw_per_dir");
  row("HBM (read + write)", "hbm_bw");
  row("bf16 dense GEMM", "peak_bf16_flops");
  const Json lat = t.value("latencies", Json::object());
  const Json kl = lat.value("kernel_launch", Json::object());
  out += "kernel launch (us): " + fmt_num(kl, "gpu_back_to_back_us") + " GPU back to back, " +
         fmt_num(kl, "event_pair_us") + " event pair, " + fmt_num(kl, "host_enqueue_us") + " host enqueue, " +
         fmt_num(kl, "host_roundtrip_us") + " host round trip\n";
  for (const char* k : {"device", "stream"}) {
    const Json b = lat.value("barrier", Json::object()).value(k, Json::object());
    out += std::string("cross-GPU barrier, ") + k + " (us): " + fmt_num(b, "value_us");
    if (b.contains("reason")) out += " (" + b.value("source", "?") + ": " + b["reason"].get<std::string>() + ")";
    out += "\n";
  }
  return out;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return median_of_sorted(v);
}

double median_of_sorted(const std::vector<double>& v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool is_calibrated_name(const std::string& name) {
  const std::string s = kCalibratedSuffix;
  return name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
}

DatasheetChoice datasheet_for(const std::string& gpu, int count, const std::string& source_dir) {
  DatasheetChoice c;
  if (gpu.empty()) return c;
  for (int pass = 0; pass < 2 && !c.found; ++pass) {
    for (const auto& name : topology_names(source_dir)) {
      if (is_calibrated_name(name)) continue;
      Topology t = load_topology(name, source_dir);
      if (t.gpu != gpu || (pass == 0 && t.gpus != count)) continue;
      c.found = true;
      c.exact = pass == 0;
      c.name = name;
      c.topo = t;
      break;
    }
  }
  return c;
}

std::string calibrated_name(const std::string& gpu, int count, const DatasheetChoice& ds) {
  if (ds.found && ds.exact) return ds.name + kCalibratedSuffix;
  std::string slug;
  for (char ch : gpu) {
    if (std::isalnum(static_cast<unsigned char>(ch))) slug += static_cast<char>(std::tolower(ch));
    else if (!slug.empty() && slug.back() != '_') slug += '_';
  }
  while (!slug.empty() && slug.back() == '_') slug.pop_back();
  if (slug.empty()) slug = "gpu";
  return slug + "_" + std::to_string(count) + kCalibratedSuffix;
}

Json make_calibrated_topology(const CalibrationInput& in) {
  const Topology& ds = in.datasheet.topo;
  const std::vector<Json>& ranks = in.ranks;
  const size_t n = ranks.size();
  Json rates = Json::object();

  // HBM: the copy kernel's best grid, bytes read + written.
  std::vector<double> hbm(n), hbm_ce(n), flops(n);
  for (size_t r = 0; r < n; ++r) {
    const Json& tests = ranks[r].value("hbm", Json::object()).value("tests", Json::array());
    hbm[r] = best_rate(tests, [](const Json& t) { return t.value("method", "") == "sm_copy"; });
    hbm_ce[r] = best_rate(tests, [](const Json& t) { return t.value("method", "") == "copy_engine"; });
    const Json& g = ranks[r].value("gemm", Json::object());
    flops[r] = g.contains("error") ? 0.0 : num(g, "rate");
  }
  rates["hbm_bw"] = rate_entry(hbm, ds.hbm_bw, "B/s",
                               "device-to-device copy kernel (16-byte loads and stores) over buffers far larger than "
                               "L2, bytes read + written per second; best over grid sizes; median over GPUs",
                               errors_of(ranks, "hbm"));
  rates["hbm_bw"]["copy_engine_per_gpu"] = hbm_ce;
  rates["peak_bf16_flops"] =
      rate_entry(flops, ds.peak_bf16_flops, "FLOP/s",
                 "at::matmul (cuBLAS through ATen), bf16 8192x8192x8192, random normal inputs, CUDA events, median of "
                 "the repeats after warm-ups; 2*M*N*K per call; median over GPUs",
                 errors_of(ranks, "gemm"));

  // NVLink: per mechanism, the per-GPU rate with both directions loaded.
  std::string nvlink_why;
  if (n < 2) nvlink_why = "one GPU calibrated: no peer to measure NVLink against; this is the datasheet's rate";
  else if (!errors_of(ranks, "nvlink").empty()) nvlink_why = errors_of(ranks, "nvlink");
  double best = 0;
  std::string best_mech;
  for (const char* mech : kNvlinkMechanisms) {
    std::vector<double> both, one;
    std::vector<double> per_gpu(n, 0.0);
    for (size_t r = 0; r < n && nvlink_why.empty(); ++r) {
      const Json& tests = ranks[r].value("nvlink", Json::object()).value("tests", Json::array());
      std::vector<int> shifts;
      for (const auto& t : tests) {
        int s = t.value("shift", 0);
        if (std::find(shifts.begin(), shifts.end(), s) == shifts.end()) shifts.push_back(s);
      }
      std::vector<double> mine;
      for (int s : shifts) {
        auto pick = [&](const char* mode) {
          return best_rate(tests, [&](const Json& t) {
            return in_mechanism(t, mech) && t.value("shift", 0) == s && t.value("mode", "") == mode &&
                   t.value("active", false);
          });
        };
        double b = pick("both"), o = pick("one");
        if (b > 0) {
          both.push_back(b);
          mine.push_back(b);
        }
        if (o > 0) one.push_back(o);
      }
      per_gpu[r] = median_of(mine);
    }
    std::string key = std::string("nvlink_") + mech + "_bw_per_dir";
    std::string why = nvlink_why.empty() && both.empty() ? "no successful measurement" : nvlink_why;
    Json e = rate_entry(both.empty() ? std::vector<double>{} : std::vector<double>{median_of(both)},
                        ds.nvlink_bw_per_dir, "B/s", nvlink_method(mech), why);
    e["per_gpu"] = per_gpu;
    if (!one.empty()) e["one_direction"] = median_of(one);  // only rank 0 moving data, its peers idle
    if (e["source"] == "measured" && e["value"].get<double>() > best) {
      best = e["value"].get<double>();
      best_mech = mech;
    }
    rates[key] = e;
  }
  Json nv;
  if (best > 0) {
    nv = {{"value", best}, {"source", "measured"}, {"mechanism", best_mech}};
  } else {
    nv = {{"value", ds.nvlink_bw_per_dir}, {"source", ds.nvlink_bw_per_dir > 0 ? "datasheet" : "absent"},
          {"reason", nvlink_why.empty() ? "no NVLink mechanism measured successfully" : nvlink_why}};
  }
  nv["unit"] = "B/s";
  nv["method"] = "the best of the three mechanisms below (nvlink_*_bw_per_dir), per GPU per direction with both "
                 "directions loaded, as collectives load them";
  if (ds.nvlink_bw_per_dir > 0) {
    nv["datasheet"] = ds.nvlink_bw_per_dir;
    if (best > 0) nv["of_datasheet"] = best / ds.nvlink_bw_per_dir;
  }
  rates["nvlink_bw_per_dir"] = nv;

  // Latencies (no datasheet values exist for these).
  Json lat = Json::object();
  for (const char* k : {"gpu_back_to_back_us", "event_pair_us", "host_enqueue_us", "host_roundtrip_us"}) {
    std::vector<double> v(n);
    for (size_t r = 0; r < n; ++r) v[r] = num(ranks[r].value("launch", Json::object()), k);
    lat["kernel_launch"][k] = positive(v).empty() ? Json(nullptr) : Json(median_of(positive(v)));
    lat["kernel_launch"]["per_gpu"][k] = v;
  }
  lat["kernel_launch"]["method"] =
      "an empty kernel: gpu_back_to_back_us, per kernel of a batch enqueued behind a closed gate (GPU time "
      "between launches); event_pair_us, events around one launch; host_enqueue_us, host time per launch call; "
      "host_roundtrip_us, launch + cudaStreamSynchronize on the host; medians over repeats, then over GPUs";
  if (errors_of(ranks, "launch").size()) lat["kernel_launch"]["error"] = errors_of(ranks, "launch");
  std::string barrier_why = n < 2 ? "one GPU calibrated: no peer for a cross-GPU barrier" : errors_of(ranks, "barrier");
  for (const char* k : {"device", "stream"}) {
    std::vector<double> v(n);
    for (size_t r = 0; r < n; ++r)
      v[r] = num(ranks[r].value("barrier", Json::object()).value(k, Json::object()), "median_us");
    Json e;
    if (barrier_why.empty() && !positive(v).empty()) {
      e = {{"value_us", median_of(positive(v))}, {"source", "measured"}, {"per_gpu", v}};
    } else {
      e = {{"value_us", nullptr}, {"source", "absent"}, {"reason", barrier_why.empty() ? "not measured" : barrier_why}};
    }
    e["method"] = std::string(k) == "device"
                      ? "pkb::device::block_barrier (pkb/device.cuh) over a symmetric buffer's signal pads, one block, "
                        "many barriers in one kernel; time per barrier; median over repeats, then over GPUs"
                      : "SymmetricBuffer::barrier() (PyTorch symmetric memory's stream-ordered barrier), many calls "
                        "between events; time per call; median over repeats, then over GPUs";
    lat["barrier"][k] = e;
  }

  Json j;
  j["name"] = in.name;
  j["description"] = "Rates measured on this machine by pkb calibrate (" + std::to_string(in.gpus) + "x " + in.gpu +
                     "); see \"rates\" for each one's source and method, \"provenance\" for when and how.";
  j["calibrated"] = true;
  j["format_version"] = kCalibrationFormatVersion;
  j["gpu"] = in.gpu;
  j["gpus"] = in.gpus;
  j["p2p"] = in.p2p;
  j["multicast"] = in.datasheet.found ? ds.multicast : false;
  j["nvlink_bw_per_dir"] = rates["nvlink_bw_per_dir"]["value"];
  j["hbm_bw"] = rates["hbm_bw"]["value"];
  j["peak_bf16_flops"] = rates["peak_bf16_flops"]["value"];
  j["datasheet"] = in.datasheet.found ? Json(in.datasheet.name) : Json(nullptr);
  if (in.datasheet.found && !in.datasheet.exact)
    j["datasheet_note"] = "no datasheet file for " + std::to_string(in.gpus) + "x " + in.gpu + "; '" +
                          in.datasheet.name + "' has the same GPU (" + std::to_string(ds.gpus) + " of them)";
  j["rates"] = rates;
  j["latencies"] = lat;
  j["provenance"] = in.provenance;
  j["raw"] = ranks;
  return j;
}

CalibratedChoice load_calibrated(const std::string& name_or_path, const std::string& source_dir) {
  std::string path = topology_path(name_or_path, source_dir);
  Json j = read_json(path);
  PKB_CHECK(j.value("calibrated", false), "'", path,
            "' is not a calibrated topology (no \"calibrated\": true; `pkb calibrate` writes one)");
  CalibratedChoice c;
  c.valid = true;
  c.topo = topology_from_json(j);
  c.path = path;
  c.nvlink_source = j.contains("rates") && j["rates"].contains("nvlink_bw_per_dir")
                        ? j["rates"]["nvlink_bw_per_dir"].value("source", "unknown")
                        : "unknown";
  return c;
}

CalibratedChoice find_calibrated(const std::string& gpu, int count, const std::string& source_dir) {
  if (gpu.empty()) return {};
  for (const auto& name : topology_names(source_dir)) {
    if (!is_calibrated_name(name)) continue;
    Json j = read_json(topology_path(name, source_dir));
    if (!j.value("calibrated", false) || j.value("gpu", "") != gpu || j.value("gpus", 0) != count) continue;
    return load_calibrated(name, source_dir);
  }
  return {};
}

CalibratedChoice choose_calibrated(const std::string& option, const std::string& device,
                                   const std::string& source_dir) {
  CalibratedChoice c;
  if (option == "none") return c;
  if (!option.empty()) {
    c = load_calibrated(option, source_dir);
  } else if (device == "cuda") {
    DetectedMachine m = detect_machine();
    if (m.ok) c = find_calibrated(m.gpus[0], static_cast<int>(m.gpus.size()), source_dir);
  }
  if (c.valid)
    std::fprintf(stderr, "pkb: calibrated roofline from %s (NVLink %.1f GB/s [%s], HBM %.2f TB/s, bf16 %.0f TFLOP/s)\n",
                 c.path.c_str(), c.topo.nvlink_bw_per_dir / 1e9, c.nvlink_source.get<std::string>().c_str(),
                 c.topo.hbm_bw / 1e12, c.topo.peak_bf16_flops / 1e12);
  return c;
}

void add_calibrated_roofline(Json& record, const CalibratedChoice& c) {
  if (!c.valid || !record.contains("times") || !record.contains("cost")) return;
  const Json& cj = record["cost"];
  Cost cost;
  cost.nvlink_bytes_per_rank = num(cj, "nvlink_bytes_per_rank");
  cost.hbm_bytes_per_rank = num(cj, "hbm_bytes_per_rank");
  cost.flops_per_rank = num(cj, "flops_per_rank");
  Roofline roof = roofline(cost, c.topo);
  if (!roof.valid) return;
  double ref = num(record["times"], "reference_us"), cand = num(record["times"], "candidate_us");
  if (!record.contains("roofline") || !record["roofline"].is_object()) record["roofline"] = Json::object();
  record["roofline"]["calibrated"] = {{"topology", c.topo.name},
                                      {"file", c.path},
                                      {"t_roof_us", roof.t_roof_us},
                                      {"bound", roof.bound},
                                      {"reference_fraction", ref > 0 ? roof.t_roof_us / ref : 0.0},
                                      {"candidate_fraction", cand > 0 ? roof.t_roof_us / cand : 0.0},
                                      {"nvlink_source", c.nvlink_source}};
}

}  // namespace pkb
