// The referee's side of NOTE [referee and contestant] (worker/contestant.h):
// starts its rank's contestant, sets it up, places inputs in shared regions,
// asks it to run the candidate, serves its store requests, stops it while the
// reference runs, and turns whatever goes wrong on its side into the
// candidate's outcome (a CandidateFailure, common/outcome.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>

#include "common/outcome.h"
#include "common/results.h"
#include "worker/control_channel.h"
#include "worker/peers.h"
#include "worker/quiet_device.h"
#include "worker/tensor_transfer.h"
#include "worker/timing.h"

namespace pkb {

// Inputs as placed in one of the referee's regions: what the contestant sees
// (views of the same memory), and where.
struct Placed {
  int slot = -1;
  Json desc;
  Inputs views;
};

struct ContestantOptions {
  int rank = 0, world = 1;
  at::Device device = at::kCPU;
  bool shared_gpu = false;
  Json topology = Json::object();
  int uid = -1, gid = -1;   // the user it drops to (-1: stays this one)
  bool isolate_net = false;  // a network namespace of its own (needs root)
};

// A contestant process, started and not yet set up.
struct ContestantProcess {
  pid_t pid = -1;
  int fd = -1;        // the referee's end of the control channel
  bool exec = false;   // exec'd `pkb contestant` (this process had threads)
  std::string error;  // why it was not started (pid -1)
};

// Starts the contestant (NOTE [contestant start]): its working directory is
// `work_dir`, its stdin /dev/null, its stdout and stderr this process's (the
// rank's log), and the control channel its one other descriptor. Call it
// before this process holds anything of the evaluation.
ContestantProcess start_contestant_process(const std::string& work_dir);

class ContestantClient {
 public:
  // Sends its set-up, without waiting: it makes its CUDA context while the
  // referee sets itself up.
  ContestantClient(ContestantOptions o, ContestantProcess p);
  // Waits for its set-up; from here on its store requests go to `referee`'s
  // store. On a GPU, every rank then measures the quiet device's probe
  // (NOTE [quiet device]) before any candidate is loaded.
  void ready(RankPeers& referee);
  ~ContestantClient();
  ContestantClient(const ContestantClient&) = delete;
  ContestantClient& operator=(const ContestantClient&) = delete;

  // Loads the candidate (load_error on failure).
  void load(const std::string& candidate);
  // Copies `in` into slot `slot`'s region (the same storage each time it fits).
  Placed place(const Inputs& in, int slot);
  // The candidate on placed inputs; its outputs, copied out.
  Outputs call(const Placed& p);
  // Timing: input groups in slots 1..G, then warm-ups and segments.
  void set_groups(const std::vector<Placed>& groups);
  void warm(int calls, int start = -1);
  SegmentReport segment(const SegmentSpec& spec);
  // The outputs the last keep-segment's calls at `positions` returned, read
  // while the contestant is stopped (NOTE [fresh inputs], step 2).
  std::vector<Outputs> kept(const std::vector<int>& positions);
  Outputs last_outputs();

  // SIGSTOP / SIGCONT of the contestant and every process it started.
  void freeze();
  void thaw();
  // NOTE [quiet device]: until nothing it started still runs on the device
  // (quiet at once on CPU), for at most `deadline_us`.
  QuietWait wait_quiet(double deadline_us);

  pid_t pid() const { return pid_; }
  // Its set-up (pid, uid, isolation) and, once it has been stopped, how long
  // and how much CPU time its processes used meanwhile (none, when the stop
  // holds: NOTE [timing protocol], step 5).
  Json info() const;

 private:
  Json request(Json req, const std::vector<int>& fds = {});
  Outputs take_outputs(const Json& reply);
  [[noreturn]] void died(const std::string& what);

  RankPeers* referee_ = nullptr;
  ContestantOptions opts_;
  pid_t pid_ = -1;
  bool exec_ = false;
  std::unique_ptr<ControlChannel> ch_;
  std::map<int, std::shared_ptr<SharedRegion>> slots_;
  std::shared_ptr<SharedRegion> out_region_;
  std::vector<Json> kept_;  // the last keep-segment's descriptors, per call
  Json info_ = Json::object();
  bool frozen_ = false;
  // What freeze() stopped: a stopped process cannot fork, so thaw() resumes
  // these without another walk of /proc (1-2 ms each, 17 cycles a short
  // evaluation on CPU), unless forks outran freeze()'s passes.
  std::set<pid_t> frozen_pids_;
  bool frozen_complete_ = false;
  int64_t oom_kills_at_start_ = -1;
  double frozen_wall_s_ = 0, frozen_cpu_s_ = 0, cpu_at_freeze_s_ = 0;
  int freezes_ = 0;
  std::chrono::steady_clock::time_point frozen_at_;
#ifdef PKB_HAVE_CUDA
  std::unique_ptr<QuietDevice> quiet_;
#endif
};

// The candidate's side of the timing, run by the contestant.
class ContestantSide final : public TimedSide {
 public:
  explicit ContestantSide(ContestantClient& c) : c_(c) {}
  // Fixed tensors (NOTE [fixed inputs]) once, in the trials' region (slot 0,
  // which held them already), and every group's descriptors point there.
  void prepare(const Inputs& inputs, int groups, const FixedSet& fixed) override;
  void warm(int calls, int start = -1) override;
  SegmentReport segment(const SegmentSpec& spec) override;
  // In the group's region (the same offsets when the shapes repeat); the
  // contestant gets new descriptors before its next request if they moved.
  void refill(int g, const Inputs& contents) override;
  std::vector<Outputs> kept(const std::vector<int>& positions) override { return c_.kept(positions); }
  Outputs last_outputs() override;
  Inputs last_inputs() override { return last_placed().views; }
  const Placed& last_placed() const;
  // The contestant's one copy of the fixed inputs (views; null without any).
  const Inputs* fixed_views() const { return fixed_copy_ ? &fixed_copy_->views : nullptr; }
  void pause() override { c_.freeze(); }
  void resume() override { c_.thaw(); }
  // NOTE [quiet device]: what the device still runs of the contestant's
  // is waited for, in its account.
  void settle() override;
  const RefereeAccount* account() const override { return &acc_; }
  void open_account() override;

 private:
  // Times one request into the account.
  template <typename F>
  auto timed(int64_t calls, F f);
  ContestantClient& c_;
  RefereeAccount acc_;
  void send_groups_if_moved();
  Placed place_group(const Inputs& in, int slot);
  std::vector<Placed> groups_;
  FixedSet fixed_;
  Inputs fixed_source_;               // the referee's fixed tensors (refills must bring these)
  std::optional<Placed> fixed_copy_;  // their copy in the contestant's slot 0
  bool moved_ = false;  // a refill moved a group: its descriptors are to be sent
  size_t next_ = 0;  // the contestant's rotation, mirrored (LocalSide)
};

}  // namespace pkb
