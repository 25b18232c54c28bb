// See NOTE [referee and contestant] in worker/contestant.h; the protocol is
// listed at the top of worker/contestant.cpp.
#include "worker/contestant_client.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "common/process_tree.h"
#include "pkb/check.h"
#include "worker/contestant.h"
#include "worker/proxy_store.h"

extern char** environ;

namespace pkb {

namespace {

using Clock = std::chrono::steady_clock;

// Variables the contestant must not see: how to reach the evaluation's store
// (NOTE [referee and contestant]).
bool scrubbed(const std::string& kv) {
  for (const char* k : {"MASTER_ADDR=", "MASTER_PORT=", "TORCHELASTIC_", "PKB_JOB"})
    if (kv.rfind(k, 0) == 0) return true;
  return false;
}

// Every process below `root` (this process is a child subreaper, so the
// contestant's orphans are its children too).
std::set<pid_t> descendants(pid_t root) {
  std::vector<pid_t> v = descendants_of(root);
  return {v.begin(), v.end()};
}

// User + system CPU seconds of these processes (from /proc, the kernel's
// account: nothing the contestant can write).
double cpu_seconds(const std::set<pid_t>& pids) {
  static const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  double s = 0;
  for (pid_t p : pids) {
    std::ifstream f("/proc/" + std::to_string(p) + "/stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    size_t rp = line.rfind(')');
    if (rp == std::string::npos) continue;
    std::istringstream rest(line.substr(rp + 2));
    std::string field;
    unsigned long long ut = 0, st = 0;
    // Fields 3.. after the name: state is 3, utime 14, stime 15.
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) ut = std::stoull(field);
      if (i == 15) st = std::stoull(field);
    }
    s += (ut + st) / tick;
  }
  return s;
}

// The kernel's count of OOM kills in this process's memory cgroup (v1
// memory.oom_control or v2 memory.events; -1 when unreadable). The
// contestant is in its referee's cgroup (the evaluation's, NOTE [OOM kills]).
int64_t own_cgroup_oom_kills() {
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string file;
    if (ctl == "memory") file = "/sys/fs/cgroup/memory" + path + "/memory.oom_control";
    else if (ctl.empty()) file = "/sys/fs/cgroup" + path + "/memory.events";
    else continue;
    std::ifstream f(file);
    std::string k;
    int64_t v;
    while (f >> k >> v)
      if (k == "oom_kill") return v;
  }
  return -1;
}

std::string status_text(int st) {
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by ") + strsignal(WTERMSIG(st));
  return "ended";
}

// Bytes or JSON the channel cannot read as a reply to `op`.
CandidateFailure out_of_protocol(const std::string& op, const char* what) {
  return {Outcome::kRuntimeError, "the candidate's process answered '" + op + "' out of protocol: " + what};
}

}  // namespace

// NOTE [contestant start]
// The contestant is forked from its referee at the very start of `pkb
// worker`, before the referee has joined the store, loaded the problem or
// drawn anything, and runs contestant_main() without an exec. An exec of pkb
// paid libtorch's static initialisation again in every contestant (~0.35
// CPU-s each, measured on the 2-core CI machine: at W = 2 on CPU that made an
// evaluation of problems 1-30 cost 36% more than before the split); the fork
// shares the initialised libraries copy-on-write. What the exec gave is kept:
//  - nothing of the referee's worth having: at that point its memory holds the
//    command line and the parsed job (both readable by the contestant
//    anyway: /proc/<referee>/cmdline, the job file), and the environment,
//    whose store address and job variables the child erases (the strings
//    themselves, not only their entries in `environ`); seeds and nonces are
//    drawn later, in the referee only. A referee forked from the zygote
//    (NOTE [zygote]) also holds the zygote's memory (the driver's before it
//    read its command line) and its spawn request, whose environment
//    strings are those `environ` points to, erased the same way;
//  - descriptors: stdin /dev/null, the log, the control channel, nothing
//    else;
//  - a process that may be traced and read by its own user, as an exec'd one
//    is (the referee, not dumpable without root, stays so).
// A fork is only safe from a process with one thread (another thread may
// hold a lock the child would wait on forever): with more, the child execs
// `pkb contestant` as before (PKB_CONTESTANT_START=exec forces that path, so
// that a test keeps it working).
namespace {

// In the child, before anything else: the environment's scrubbed entries,
// unset and overwritten.
void erase_scrubbed_environment() {
  std::vector<std::pair<char*, size_t>> wipe;
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    if (!scrubbed(*e)) continue;
    wipe.emplace_back(*e, strlen(*e));
    names.emplace_back(*e, strchr(*e, '=') - *e);
  }
  for (const auto& n : names) unsetenv(n.c_str());
  for (auto [p, n] : wipe) memset(p, 0, n);
}

}  // namespace

ContestantProcess start_contestant_process(const std::string& work_dir) {
  int fds[2];
  ControlChannel::make_pair(fds);
  const char* forced = std::getenv("PKB_CONTESTANT_START");
  const bool exec_needed = thread_count() != 1 || (forced && std::string(forced) == "exec");
  // For the exec: everything built before fork (only async-signal-safe calls
  // between fork and exec in a process with other threads).
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e)
    if (!scrubbed(*e)) env_s.push_back(*e);
  std::vector<char*> envp;
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string fd_arg = "3";
  std::vector<char*> argv{const_cast<char*>("pkb"), const_cast<char*>("contestant"), const_cast<char*>("--fd"),
                          fd_arg.data(), nullptr};
  char exe_path[4096];
  ssize_t n = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);
  PKB_CHECK(n > 0, "readlink(/proc/self/exe)");
  exe_path[n] = '\0';
  const long max_fd = sysconf(_SC_OPEN_MAX);
  const char* dir = work_dir.empty() ? nullptr : work_dir.c_str();
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  PKB_CHECK(pid >= 0, "fork: ", strerror(errno));
  if (pid == 0) {
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    if (dup2(fds[1], 3) < 0) _exit(127);
    if (syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
      for (long f = 4; f < max_fd; ++f) close(static_cast<int>(f));
    if (dir && chdir(dir) != 0) _exit(127);
    if (exec_needed) {
      execve(exe_path, argv.data(), envp.data());
      _exit(127);
    }
    erase_scrubbed_environment();
    prctl(PR_SET_DUMPABLE, 1);
    contestant_main(3);  // does not return
    _exit(127);
  }
  close(fds[1]);
  return {pid, fds[0], exec_needed, ""};
}

ContestantClient::ContestantClient(ContestantOptions o, ContestantProcess p)
    : opts_(std::move(o)), pid_(p.pid), exec_(p.exec) {
  // Orphans of the contestant become this process's children, so freeze()
  // finds them (and the driver, the next subreaper up, reaps them last).
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  oom_kills_at_start_ = own_cgroup_oom_kills();
  ch_ = std::make_unique<ControlChannel>(p.fd);
  Json req = {{"op", "setup"},
              {"rank", opts_.rank},
              {"world", opts_.world},
              {"device", opts_.device.is_cuda() ? "cuda" : "cpu"},
              {"gpu", opts_.device.is_cuda() ? static_cast<int>(opts_.device.index()) : -1},
              {"shared_gpu", opts_.shared_gpu},
              {"topology", opts_.topology},
              {"uid", opts_.uid},
              {"gid", opts_.gid},
              {"isolate_net", opts_.isolate_net}};
  ch_->send(req);
}

void ContestantClient::ready(RankPeers& referee) {
  referee_ = &referee;
  // Set-up runs no candidate code: a failure here is the harness's.
  Json reply;
  try {
    for (;;) {
      ch_->recv(&reply, nullptr);
      if (!reply.contains("store")) break;
      ch_->send(serve_store_request(reply, referee_->store()));
    }
  } catch (const std::exception& e) {
    PKB_CHECK(false, "the contestant's set-up failed: ", e.what());
  }
  PKB_CHECK(!reply.contains("error"), "the contestant's set-up failed: ", reply.value("error", std::string()));
  info_ = {{"pid", static_cast<int>(pid_)},
           {"start", exec_ ? "exec" : "fork"},
           {"uid", reply.value("uid", -1)},
           {"isolation", reply.value("isolation", Json())}};
#ifdef PKB_HAVE_CUDA
  // NOTE [quiet device]: no candidate is loaded yet, and the ranks sharing
  // a GPU probe it side by side, as they will before every reference segment.
  if (opts_.device.is_cuda()) {
    quiet_ = std::make_unique<QuietDevice>();
    referee.store_barrier("contestant/quiet_baseline");
    quiet_->calibrate();
    info_["quiet_device"] = {{"baseline_us", quiet_->baseline_us()}, {"threshold_us", quiet_->threshold_us()}};
  }
#endif
}

ContestantClient::~ContestantClient() {
  if (pid_ <= 0) return;
  for (pid_t p : descendants(getpid())) kill(p, SIGKILL);
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

[[noreturn]] void ContestantClient::died(const std::string& what) {
  int st = 0;
  pid_t r = 0;
  for (int i = 0; i < 200 && r == 0; ++i) {
    r = waitpid(pid_, &st, WNOHANG);
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string how = r == pid_ ? status_text(st) : "closed its channel";
  const int64_t kills = own_cgroup_oom_kills();
  if (r == pid_ && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && kills > oom_kills_at_start_ && oom_kills_at_start_ >= 0)
    throw CandidateFailure{Outcome::kRuntimeError,
                           "out of memory while the candidate ran: the kernel's OOM killer killed the candidate's "
                           "process " + what + " (the evaluation's cgroup counted " +
                               std::to_string(kills - oom_kills_at_start_) + " kill(s))"};
  if (r == 0) kill(pid_, SIGKILL);
  else pid_ = -1;
  throw CandidateFailure{Outcome::kRuntimeError, "the candidate's process " + how + " " + what};
}

Json ContestantClient::request(Json req, const std::vector<int>& fds) {
  if (frozen_) thaw();
  const std::string op = req.value("op", "");
  try {
    ch_->send(req, fds);
    for (;;) {
      Json msg;
      std::vector<int> got;
      ch_->recv(&msg, &got);
      if (msg.contains("store")) {
        for (int f : got) close(f);
        PKB_CHECK(referee_, "the contestant asked for its store before it was ready");
        ch_->send(serve_store_request(msg, referee_->store()));
        continue;
      }
      if (msg.contains("new_region")) {
        int fd = got.empty() ? -1 : got.front();
        for (size_t i = 1; i < got.size(); ++i) close(got[i]);
        try {
          out_region_.reset();
          out_region_ = SharedRegion::open(msg["new_region"], fd, opts_.device);
        } catch (const std::exception& e) {
          throw CandidateFailure{Outcome::kRuntimeError,
                                 std::string("the candidate's process sent an unusable output region: ") + e.what()};
        }
      } else {
        for (int f : got) close(f);
      }
      if (msg.contains("error")) {
        // A claim from the untrusted side can only make its verdict worse:
        // anything but these is a runtime error.
        Outcome o = Outcome::kRuntimeError;
        std::string name = msg.value("outcome", "");
        if (name == outcome_name(Outcome::kLoadError)) o = Outcome::kLoadError;
        if (name == outcome_name(Outcome::kForbiddenApi)) o = Outcome::kForbiddenApi;
        std::string why = msg["error"].is_string() ? msg["error"].get<std::string>() : "(no reason)";
        throw CandidateFailure{o, why};
      }
      return msg;
    }
  } catch (const ChannelClosed&) {
    died("during '" + op + "'");
  } catch (const ChannelGarbage& e) {
    throw out_of_protocol(op, e.what());
  } catch (const nlohmann::json::exception& e) {
    throw out_of_protocol(op, e.what());
  }
}

void ContestantClient::load(const std::string& candidate) { request({{"op", "load"}, {"candidate", candidate}}); }

Placed ContestantClient::place(const Inputs& in, int slot) {
  std::vector<at::Tensor> ts;
  for (const auto& a : in.args())
    if (auto t = std::get_if<at::Tensor>(&a.value)) ts.push_back(*t);
  const size_t need = region_bytes_for(ts);
  auto& r = slots_[slot];
  if (!r || r->bytes() < need) {
    r = SharedRegion::create(need, opts_.device);
    std::vector<int> fds;
    if (r->fd() >= 0) fds.push_back(r->fd());
    request({{"op", "region"}, {"id", slot}, {"desc", r->describe()}}, fds);
  }
  Placed p;
  p.slot = slot;
  p.desc = place_inputs(in, *r, &p.views);
  return p;
}

Outputs ContestantClient::take_outputs(const Json& reply) {
  if (!out_region_) throw CandidateFailure{Outcome::kRuntimeError, "the candidate's process sent no output region"};
  // Stopped while its outputs are copied out: none of its threads can change them meanwhile.
  freeze();
  Outputs out;
  try {
    out = outputs_from(reply.at("outputs"), *out_region_);
  } catch (const std::exception& e) {
    thaw();
    throw CandidateFailure{Outcome::kRuntimeError, e.what()};
  }
  thaw();
  return out;
}

Outputs ContestantClient::call(const Placed& p) {
  return take_outputs(request({{"op", "call"}, {"region", p.slot}, {"inputs", p.desc}}));
}

void ContestantClient::set_groups(const std::vector<Placed>& groups) {
  Json g = Json::array();
  for (const auto& p : groups) g.push_back({{"region", p.slot}, {"inputs", p.desc}});
  request({{"op", "groups"}, {"groups", g}});
}

void ContestantClient::warm(int calls, int start) {
  request({{"op", "warm"}, {"calls", calls}, {"start", start}});
}

SegmentReport ContestantClient::segment(const SegmentSpec& spec) {
  Json r = request({{"op", "segment"},
                    {"iters", spec.iters},
                    {"tag", spec.tag},
                    {"gate_ms", spec.gate_ms},
                    {"record", spec.record},
                    {"host_sync", spec.host_sync},
                    {"start", spec.start},
                    {"keep", spec.keep}});
  SegmentReport rep;
  auto bad = [&](const std::string& why) {
    return CandidateFailure{Outcome::kTimingAnomaly, "the candidate's process reported " + why};
  };
  try {
    rep.timed_out = r.at("timed_out").get<bool>();
    rep.span_us = r.at("span_us").get<double>();
    rep.wall_us = r.at("wall_us").get<double>();
    rep.samples = r.at("samples").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("a malformed segment: ") + e.what());
  }
  if (spec.record && static_cast<int>(rep.samples.size()) != spec.iters)
    throw bad(std::to_string(rep.samples.size()) + " samples for " + std::to_string(spec.iters) + " timed calls");
  for (double v : rep.samples)
    if (!std::isfinite(v) || v < 0) throw bad("an impossible time (" + std::to_string(v) + " us)");
  if (!std::isfinite(rep.span_us) || !std::isfinite(rep.wall_us)) throw bad("an impossible span");
  kept_.clear();
  if (spec.keep) {
    const Json& k = r.contains("kept") ? r["kept"] : Json();
    if (!k.is_array() || static_cast<int>(k.size()) != spec.iters)
      throw CandidateFailure{Outcome::kRuntimeError, "the candidate's process did not send the outputs of every call"};
    kept_.assign(k.begin(), k.end());
  }
  return rep;
}

std::vector<Outputs> ContestantClient::kept(const std::vector<int>& positions) {
  if (!out_region_) throw CandidateFailure{Outcome::kRuntimeError, "the candidate's process sent no output region"};
  const bool was_frozen = frozen_;
  freeze();
  std::vector<Outputs> out;
  try {
    for (int p : positions) {
      PKB_CHECK(p >= 0 && p < static_cast<int>(kept_.size()), "no kept call ", p);
      out.push_back(outputs_from(kept_[p], *out_region_));
    }
  } catch (const std::exception& e) {
    if (!was_frozen) thaw();
    throw CandidateFailure{Outcome::kRuntimeError, e.what()};
  }
  if (!was_frozen) thaw();
  return out;
}

Outputs ContestantClient::last_outputs() { return take_outputs(request({{"op", "last"}})); }

void ContestantClient::freeze() {
  if (frozen_ || pid_ <= 0) return;
  // Until no new process shows up (one may fork while the others stop).
  std::set<pid_t> stopped;
  bool settled = false;
  for (int pass = 0; pass < 10 && !settled; ++pass) {
    settled = true;
    for (pid_t p : descendants(getpid()))
      if (stopped.insert(p).second) {
        kill(p, SIGSTOP);
        settled = false;
      }
  }
  frozen_complete_ = settled;
  frozen_ = true;
  ++freezes_;
  frozen_at_ = Clock::now();
  cpu_at_freeze_s_ = cpu_seconds(stopped);
  frozen_pids_ = std::move(stopped);
}

void ContestantClient::thaw() {
  if (!frozen_) return;
  // Forks outran the passes: what escaped them ran meanwhile, and counts.
  if (!frozen_complete_) frozen_pids_ = descendants(getpid());
  frozen_cpu_s_ += std::max(0.0, cpu_seconds(frozen_pids_) - cpu_at_freeze_s_);
  frozen_wall_s_ += std::chrono::duration<double>(Clock::now() - frozen_at_).count();
  for (pid_t p : frozen_pids_) kill(p, SIGCONT);
  frozen_pids_.clear();
  frozen_ = false;
}

QuietWait ContestantClient::wait_quiet(double deadline_us) {
#ifdef PKB_HAVE_CUDA
  if (quiet_) return quiet_->wait(deadline_us);
#endif
  (void)deadline_us;
  return QuietWait();
}

Json ContestantClient::info() const {
  Json j = info_;
  // Its high-water mark of resident memory (the kernel's, from /proc): the
  // candidate's own memory, apart from the referee's (NOTE [memory record]).
  if (pid_ > 0) {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("VmHWM:", 0) == 0) j["host_peak_bytes"] = std::stoll(line.substr(6)) * 1024;
  }
  if (freezes_)
    j["stopped"] = {{"times", freezes_}, {"wall_s", frozen_wall_s_}, {"cpu_s", frozen_cpu_s_}};
  return j;
}

void ContestantSide::prepare(const Inputs& inputs, int groups, const FixedSet& fixed) {
  groups_.clear();
  fixed_ = fixed;
  fixed_copy_.reset();
  fixed_source_ = Inputs();
  if (!fixed.empty()) {
    fixed_source_ = only_fixed(inputs, fixed);
    fixed_copy_ = c_.place(fixed_source_, 0);
  }
  for (int g = 0; g < groups; ++g) groups_.push_back(place_group(inputs, 1 + g));
  c_.set_groups(groups_);
  next_ = 0;
}

template <typename F>
auto ContestantSide::timed(int64_t calls, F f) {
  c_.thaw();  // not counted: the stop and the restart are the referee's
  auto t0 = Clock::now();
  auto finish = [&] {
    acc_.wall_us += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    acc_.calls += calls;
    ++acc_.requests;
  };
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    finish();
  } else {
    auto r = f();
    finish();
    return r;
  }
}

Placed ContestantSide::place_group(const Inputs& in, int slot) {
  if (fixed_.empty()) return c_.place(in, slot);
  Placed p = c_.place(without_fixed(in, fixed_), slot);
  for (size_t i : fixed_) {
    PKB_CHECK(i < in.size() && in.tensor(i).is_same(fixed_source_.tensor(i)),
              "new contents replace fixed input ", i, " (NOTE [fixed inputs])");
    p.desc[i] = fixed_copy_->desc[i];
    p.desc[i]["region"] = fixed_copy_->slot;
    p.views = with_arg(p.views, i, fixed_copy_->views.tensor(i));
  }
  return p;
}

void ContestantSide::refill(int g, const Inputs& contents) {
  PKB_CHECK(g >= 0 && g < static_cast<int>(groups_.size()), "no input group ", g);
  Placed p = place_group(contents, 1 + g);
  if (p.desc != groups_[g].desc) moved_ = true;
  groups_[g] = std::move(p);
}

void ContestantSide::send_groups_if_moved() {
  if (!moved_) return;
  c_.set_groups(groups_);
  moved_ = false;
}

void ContestantSide::warm(int calls, int start) {
  send_groups_if_moved();
  timed(calls, [&] { c_.warm(calls, start); });
  if (start >= 0) next_ = static_cast<size_t>(start);
  next_ += calls;
}

SegmentReport ContestantSide::segment(const SegmentSpec& spec) {
  send_groups_if_moved();
  if (spec.start >= 0) next_ = static_cast<size_t>(spec.start);
  SegmentReport r = timed(spec.iters, [&] { return c_.segment(spec); });
  if (spec.host_sync) ++acc_.host_sync_segments;
  next_ += spec.iters;
  return r;
}

void ContestantSide::settle() {
  // Once it was busy at a deadline the verdict is taken: one probe, no wait.
  const QuietWait w = c_.wait_quiet(acc_.left_busy ? 0 : kQuietDeadlineUs);
  ++acc_.settles;
  acc_.max_probe_us = std::max(acc_.max_probe_us, w.max_probe_us);
  if (w.busy_seen) {
    ++acc_.busy_settles;
    acc_.settle_wait_us += w.waited_us;
    acc_.wall_us += w.waited_us;
  }
  if (!w.quiet) acc_.left_busy = true;
}

// What the settles saw (a device left busy) stays: that verdict is taken.
void ContestantSide::open_account() {
  acc_.wall_us = 0;
  acc_.calls = 0;
  acc_.requests = 0;
}

Outputs ContestantSide::last_outputs() {
  return timed(0, [&] { return c_.last_outputs(); });
}

const Placed& ContestantSide::last_placed() const {
  PKB_CHECK(!groups_.empty(), "no input groups");
  return groups_[(next_ + groups_.size() - 1) % groups_.size()];
}

}  // namespace pkb
