// `pkb generate --problems SEL --model M --endpoint URL --samples K --out DIR`:
// candidates from a model, one command away from `pkb run --solutions DIR`.
//
// NOTE [generate files]
// For each problem and sample, the prompt is `pkb prompt`'s text (with
// --device cpu, plus a note that the candidate is CPU-mode C++), sent as one
// user message (driver/chat_completion.h). The reply is written to
// DIR/NN_slug/sample_K.response.md, then the last fenced code block
// (response_extract.h, as for any raw response) to sample_K.cu (.cpp with
// --device cpu), then the sample's entry to DIR/manifest.json: each file
// atomically (temporary file + rename), in that order, as the reply arrives,
// so a killed run loses only the requests in flight. A reply without code
// gets no sample_K.cu: `pkb run` then finds sample_K.response.md alone
// (plan.h) and records compile_error, "no code in the response", as the
// published harness does. A request that failed (NOTE [generate retries])
// writes no file, only its entry (status "failed", the error): there is no
// reply to evaluate, and --resume asks again.
//
// NOTE [generate resume]
// A sample is written when its manifest entry says "code" or "no_code" and
// the files it names exist. --resume requests every other sample of the
// selection: never requested, failed, interrupted before its entry was
// written, or deleted by the user (either file). A stale file of such a
// sample is replaced, with a note. Without --resume a folder holding a
// manifest is refused, as is any non-empty folder; --resume refuses a
// manifest of another model or device (the files would mix two runs).
//
// Ctrl-C (SIGINT) or SIGTERM: no new request starts, those in flight are
// abandoned (nothing of them is written), the manifest is complete for what
// was written, and pkb then dies of the signal; a second Ctrl-C kills at once.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "common/build_info.h"
#include "common/files.h"
#include "common/outcome.h"
#include "common/results.h"
#include "common/sha256.h"
#include "common/topology_io.h"
#include "driver/chat_completion.h"
#include "driver/commands.h"
#include "driver/http_client.h"
#include "driver/problem_catalog.h"
#include "driver/prompt.h"
#include "driver/response_extract.h"
#include "pkb/check.h"

namespace pkb {

namespace {

inline constexpr int kManifestSchemaVersion = 1;

std::atomic<bool> g_stop{false};       // set by a signal or a fatal error: no new request, abandon those in flight
volatile sig_atomic_t g_signal = 0;    // the signal that asked to stop

extern "C" void on_stop_signal(int sig) {
  g_signal = sig;
  g_stop.store(true);
}

// Installs on_stop_signal for SIGINT and SIGTERM for its lifetime; the
// handler resets itself (SA_RESETHAND), so a second signal kills.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

std::string cpu_mode_note() {
  return "\n## CPU mode\n\n"
         "This candidate runs in pkb's CPU mode: write a C++ file (no CUDA, no device code) using the same "
         "pkb::Context API, whose symmetric buffers are host shared memory there, and reply with it in one fenced "
         "```cpp block.\n";
}

std::string fmt(const char* f, double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string clock_text(double s) {
  const int t = static_cast<int>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%d:%02d", t / 60, t % 60);
  return buf;
}

struct Job {
  const ProblemInfo* problem = nullptr;
  int sample = 0;
  const std::string* prompt = nullptr;
  std::string prompt_sha;
  std::string stem;  // NN_slug/sample_K, relative to DIR
};

using SampleKey = std::pair<int, int>;  // (problem id, sample)

// DIR/manifest.json: the run's settings and one entry per sample, rewritten
// whole (atomically) after every sample.
class Manifest {
 public:
  Manifest(std::string dir, Json header) : path_(dir + "/manifest.json"), header_(std::move(header)) {}

  void load(const Json& j) {
    if (j.contains("started_at")) header_["started_at"] = j["started_at"];
    header_["resumed_at"] = utc_timestamp();
    const Json samples = j.contains("samples") && j["samples"].is_array() ? j["samples"] : Json::array();
    for (const Json& e : samples)
      if (e.is_object() && e.contains("problem_id") && e["problem_id"].is_number_integer() && e.contains("sample") &&
          e["sample"].is_number_integer())
        entries_[{e["problem_id"].get<int>(), e["sample"].get<int>()}] = e;
  }
  const Json* find(const SampleKey& k) const {
    auto it = entries_.find(k);
    return it == entries_.end() ? nullptr : &it->second;
  }
  void put(const SampleKey& k, Json e) { entries_[k] = std::move(e); }
  void write() {
    Json j = header_;
    j["updated_at"] = utc_timestamp();
    j["samples"] = Json::array();
    for (const auto& [k, e] : entries_) j["samples"].push_back(e);
    // Error texts quote servers' bodies, which may be cut inside a UTF-8 sequence.
    write_file_atomic(path_, j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n", /*overwrite=*/true);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  Json header_;
  std::map<SampleKey, Json> entries_;
};

std::string text_field(const Json& e, const char* key) {
  return e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : std::string();
}

// NOTE [generate resume]
bool sample_written(const Json* e, const std::string& dir) {
  if (!e) return false;
  const std::string st = text_field(*e, "status"), resp = text_field(*e, "response"),
                    cand = text_field(*e, "candidate");
  if (st != "code" && st != "no_code") return false;
  if (resp.empty() || !is_regular_file(dir + "/" + resp)) return false;
  return st == "no_code" || (!cand.empty() && is_regular_file(dir + "/" + cand));
}

// Counters and the progress line, under the writer's lock.
struct Tally {
  int total = 0, done = 0, code = 0, no_code = 0, failed = 0;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();

  std::string eta() const {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return done < total ? "  ETA " + clock_text(el / done * (total - done)) : "";
  }
};

}  // namespace

int cmd_generate(const GenerateOptions& o) {
  // Phase: resolve what the user asked for.
  PKB_CHECK(have_http_client(),
            "this pkb was built without libcurl, so pkb generate is compiled out (install libcurl4-openssl-dev, "
            "then re-run scripts/setup)");
  const std::string src = source_dir();
  ProblemCatalog catalog = ProblemCatalog::discover(build_dir());
  const std::vector<int> ids = catalog.select(o.problems);
  PKB_CHECK(!o.model.empty(), "--model needs a name");
  PKB_CHECK(o.endpoint.rfind("http://", 0) == 0 || o.endpoint.rfind("https://", 0) == 0, "--endpoint '", o.endpoint,
            "' is not an http:// or https:// URL");
  PKB_CHECK(o.samples >= 1 && o.concurrency >= 1, "--samples and --concurrency must be at least 1");
  PKB_CHECK(!o.out.empty(), "--out names the folder to write");
  PKB_CHECK(!o.api_key_env.empty(), "--api-key-env names an environment variable");
  const std::string dir = o.out;
  const std::string url = chat_completions_url(o.endpoint);
  const char* key = std::getenv(o.api_key_env.c_str());
  const std::string api_key = key ? key : "";
  const std::string ext = o.device == "cpu" ? ".cpp" : ".cu";
  const Topology topo = load_topology(o.topology, src);

  // Phase: the folder, new or resumed (NOTE [generate resume]).
  struct stat st;
  const bool dir_exists = stat(dir.c_str(), &st) == 0;
  PKB_CHECK(!dir_exists || S_ISDIR(st.st_mode), "--out '", dir, "' exists and is not a folder");
  const std::string manifest_path = dir + "/manifest.json";
  const bool have_manifest = is_regular_file(manifest_path);
  if (!o.resume) {
    PKB_CHECK(!have_manifest, "'", dir, "' already holds a generation (", manifest_path,
              "); --resume requests only the samples it lacks, or choose another --out");
    PKB_CHECK(!dir_exists || is_empty_directory(dir), "--out '", dir, "' exists and is not empty");
  } else {
    PKB_CHECK(have_manifest || !dir_exists || is_empty_directory(dir), "--resume: '", dir,
              "' has no manifest.json (it is not a pkb generate folder)");
  }
  PKB_CHECK(mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST, "cannot make --out '", dir, "': ", strerror(errno));
  Json header;
  header["schema_version"] = kManifestSchemaVersion;
  header["kind"] = "generation";
  header["model"] = o.model;
  header["endpoint"] = url;
  header["device"] = o.device;
  header["prompt_topology"] = topo.name;
  header["api_key_env"] = o.api_key_env;  // the variable's name; never its value
  header["git_sha"] = git_sha();
  header["started_at"] = utc_timestamp();
  Manifest manifest(dir, header);
  if (have_manifest) {
    std::ifstream f(manifest_path);
    Json old = Json::parse(f, nullptr, /*allow_exceptions=*/false);
    PKB_CHECK(!old.is_discarded() && old.is_object(), "--resume: ", manifest_path, " is not JSON");
    PKB_CHECK(old.value("kind", std::string()) == "generation" &&
                  old.value("schema_version", 0) == kManifestSchemaVersion,
              "--resume: ", manifest_path, " is not a pkb generate manifest of schema version ",
              kManifestSchemaVersion);
    PKB_CHECK(old.value("model", std::string()) == o.model && old.value("device", std::string()) == o.device,
              "--resume: ", dir, " holds model '", old.value("model", std::string()), "' for --device ",
              old.value("device", std::string()), ", not '", o.model, "' for --device ", o.device,
              " (a folder holds one model's samples)");
    if (old.value("endpoint", std::string()) != url)
      std::fprintf(stderr, "note: %s was generated from %s; new samples come from %s (each entry names its endpoint)\n",
                   dir.c_str(), old.value("endpoint", std::string()).c_str(), url.c_str());
    manifest.load(old);
  }

  // Phase: the samples to request.
  std::map<int, std::string> prompts;
  std::vector<Job> todo;
  int already = 0;
  for (int id : ids) {
    const ProblemInfo& p = catalog.by_id(id);
    if (o.device == "cpu" && !p.spec.runs_on_cpu) {
      std::fprintf(stderr, "skipped %s: cannot run on CPU: %s\n", p.folder_name().c_str(),
                   p.spec.cpu_skip_reason.c_str());
      continue;
    }
    std::string& prompt = prompts[id];
    prompt = prompt_text(p, topo) + (o.device == "cpu" ? cpu_mode_note() : "");
    const std::string sha = sha256_hex(prompt);
    for (int k = 0; k < o.samples; ++k) {
      if (sample_written(manifest.find({id, k}), dir)) {
        ++already;
        continue;
      }
      todo.push_back({&p, k, &prompt, sha, p.folder_name() + "/sample_" + std::to_string(k)});
    }
  }
  manifest.write();
  std::fprintf(stderr,
               "pkb generate: %zu request(s) (%zu problem(s) x %d sample(s)%s) to %s, model %s, %d in flight; "
               "files in %s%s\n",
               todo.size(), prompts.size(), o.samples,
               already ? (", " + std::to_string(already) + " already written").c_str() : "", url.c_str(),
               o.model.c_str(), std::min<int>(o.concurrency, static_cast<int>(todo.size())), dir.c_str(),
               api_key.empty() ? ("; $" + o.api_key_env + " is unset: no Authorization header").c_str() : "");
  if (todo.empty()) {
    std::fprintf(stderr, "nothing to request: every sample is written (manifest: %s)\n", manifest.path().c_str());
    return kExitAllCorrect;
  }

  // Phase: C requests in flight; each reply written as it arrives (NOTE [generate files]).
  http_global_init();
  g_stop.store(false);
  g_signal = 0;
  StopSignals signals;
  std::mutex mu;  // the manifest, the tally, the fatal error, the folders
  Tally tally;
  tally.total = static_cast<int>(todo.size());
  std::string fatal;
  std::atomic<size_t> next{0};
  std::atomic<int> in_flight{0};

  auto record = [&](const Job& job, const ChatResult& r) {
    const SampleKey key{job.problem->spec.id, job.sample};
    const std::string resp_rel = job.stem + ".response.md", cand_rel = job.stem + ext;
    Json e;
    e["problem_id"] = key.first;
    e["slug"] = job.problem->spec.slug;
    e["sample"] = job.sample;
    e["endpoint"] = url;
    e["prompt_sha256"] = job.prompt_sha;
    e["temperature"] = o.temperature >= 0 ? Json(o.temperature) : Json(nullptr);
    e["max_tokens"] = o.max_tokens > 0 ? Json(o.max_tokens) : Json(nullptr);
    std::string status = "failed";
    std::optional<ExtractedCode> code;
    if (r.status == ChatStatus::kOk) {
      code = extract_candidate(r.content);
      status = code ? "code" : "no_code";
    }
    std::lock_guard<std::mutex> lock(mu);
    if (status != "failed") {
      mkdir((dir + "/" + job.problem->folder_name()).c_str(), 0755);
      const std::string resp = dir + "/" + resp_rel, cand = dir + "/" + cand_rel;
      if (is_regular_file(resp) || is_regular_file(cand))
        std::fprintf(stderr, "note: replacing the unrecorded files of %s (NOTE [generate resume])\n",
                     job.stem.c_str());
      // A stale candidate of this sample must not outlive a reply without code.
      if (!code) unlink(cand.c_str());
      write_file_atomic(resp, r.content, /*overwrite=*/true);
      if (code) write_file_atomic(cand, code->code, /*overwrite=*/true);
    }
    e["status"] = status;
    e["response"] = status == "failed" ? Json(nullptr) : Json(resp_rel);
    e["candidate"] = code ? Json(cand_rel) : Json(nullptr);
    e["finish_reason"] = r.finish_reason.empty() ? Json(nullptr) : Json(r.finish_reason);
    e["usage"] = r.usage;
    e["response_model"] = r.response_model.empty() ? Json(nullptr) : Json(r.response_model);
    e["response_id"] = r.id.empty() ? Json(nullptr) : Json(r.id);
    e["latency_s"] = r.status == ChatStatus::kOk ? Json(r.latency_s) : Json(nullptr);
    e["total_s"] = r.total_s;
    e["attempts"] = static_cast<int>(r.attempts.size());
    Json log = Json::array();
    for (const ChatAttempt& a : r.attempts) {
      Json aj = {{"http_status", a.http_status ? Json(a.http_status) : Json(nullptr)},
                 {"seconds", a.seconds},
                 {"error", a.error.empty() ? Json(nullptr) : Json(a.error)}};
      if (a.wait_s > 0) aj["wait_s"] = a.wait_s;
      if (!a.retry_after.empty()) aj["retry_after"] = a.retry_after;
      log.push_back(aj);
    }
    e["attempt_log"] = log;
    std::string error;
    if (status == "failed") error = r.error;
    else if (status == "no_code")
      error = r.finish_reason == "length"
                  ? "no code in the response: it was cut at the token limit (finish_reason length) before a "
                    "complete code block"
                  : "no code in the response";
    e["error"] = error.empty() ? Json(nullptr) : Json(error);
    e["finished_at"] = utc_timestamp();
    manifest.put(key, e);
    manifest.write();

    ++tally.done;
    ++(status == "code" ? tally.code : status == "no_code" ? tally.no_code : tally.failed);
    std::string line = "[" + std::to_string(tally.done) + "/" + std::to_string(tally.total) + "] " +
                       job.problem->folder_name() + " #" + std::to_string(job.sample) + "  " + status;
    if (r.usage.is_object() && r.usage.contains("completion_tokens") && r.usage["completion_tokens"].is_number())
      line += "  " + std::to_string(r.usage["completion_tokens"].get<long>()) + " tok";
    if (r.status == ChatStatus::kOk) line += "  " + fmt("%.1f s", r.latency_s);
    if (r.attempts.size() > 1) line += "  " + std::to_string(r.attempts.size()) + " attempts";
    if (!r.finish_reason.empty() && r.finish_reason != "stop") line += "  finish_reason " + r.finish_reason;
    if (!error.empty() && status == "failed") line += "  (" + error.substr(0, 160) + ")";
    line += "  | " + std::to_string(in_flight.load()) + " in flight" + tally.eta();
    std::fprintf(stderr, "%s\n", line.c_str());
  };

  auto stop_with = [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (fatal.empty()) fatal = why;
    g_stop.store(true);
  };
  auto worker = [&] {
    try {
      HttpClient http;
      for (size_t i = next++; i < todo.size() && !g_stop.load(); i = next++) {
        const Job& job = todo[i];
        ChatRequest req;
        req.url = url;
        req.model = o.model;
        req.prompt = *job.prompt;
        req.temperature = o.temperature;
        req.max_tokens = o.max_tokens;
        req.api_key = api_key;
        req.timeout_s = o.request_timeout_s;
        req.retries = o.retries;
        ++in_flight;
        ChatResult r = request_chat_completion(http, req, &g_stop, [&](const std::string& line) {
          std::fprintf(stderr, "%s: %s\n", job.stem.c_str(), line.c_str());
        });
        --in_flight;
        if (r.status == ChatStatus::kCancelled) break;
        if (r.status == ChatStatus::kFatal) {
          stop_with(r.error);
          break;
        }
        try {
          record(job, r);
        } catch (const std::exception& ex) {  // a full disk, a folder made unwritable: stop, keep what is written
          stop_with("writing " + job.stem + ": " + ex.what());
          break;
        }
      }
    } catch (const std::exception& ex) {  // never std::terminate in a worker thread
      stop_with(std::string("pkb generate: ") + ex.what());
    }
  };
  std::vector<std::thread> pool;
  const int threads = std::min<int>(o.concurrency, static_cast<int>(todo.size()));
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  // Phase: report.
  const int missing = tally.total - tally.done;
  std::fprintf(stderr, "generated %d of %d: %d with code, %d without code, %d failed%s; manifest: %s\n", tally.done,
               tally.total, tally.code, tally.no_code, tally.failed,
               missing ? (", " + std::to_string(missing) + " not requested or abandoned").c_str() : "",
               manifest.path().c_str());
  if (g_signal) {
    const int sig = g_signal;
    std::fprintf(stderr, "interrupted by %s: every reply received is written; --resume requests the rest\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM");
    signal(sig, SIG_DFL);
    raise(sig);
    return kExitSomeNotCorrect;
  }
  PKB_CHECK(fatal.empty(), fatal,
            fatal.find("HTTP 401") != std::string::npos || fatal.find("HTTP 403") != std::string::npos
                ? " (the key comes from $" + o.api_key_env + (api_key.empty() ? ", which is unset)" : ")")
                : std::string(),
            "; nothing more was requested. Fix it and re-run with --resume");
  if (tally.failed)
    std::fprintf(stderr, "%d request(s) failed (their errors are in the manifest); --resume asks again\n", tally.failed);
  else
    std::fprintf(stderr, "next: pkb run --solutions %s%s\n", dir.c_str(), o.device == "cpu" ? " --device cpu" : "");
  return tally.failed ? kExitSomeNotCorrect : kExitAllCorrect;
}

}  // namespace pkb
