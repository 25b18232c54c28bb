// See NOTE [referee and contestant] in contestant.h. The protocol, one
// request and one reply at a time (the referee's side is ContestantClient):
//   setup {rank, world, device, gpu, shared_gpu, topology, uid, gid, isolate_net}
//         -> {ok, uid, net_isolated, isolation}      (no candidate code yet)
//   load {candidate}                         -> {ok} | {error, outcome}
//   region {id, desc} (+ fd on CPU)          -> {ok}  (a referee region to map)
//   call {region, inputs}                    -> {outputs, region} | {error, outcome}
//   groups {groups: [{region, inputs}]}      -> {ok}  (timing input groups)
//   warm {calls, start}                      -> {ok} | {error, outcome}
//   segment {iters, tag, gate_ms, record, host_sync, start, keep}
//                                            -> {samples, span_us, wall_us, timed_out, [kept]}
//         kept: per call, its outputs' descriptors in the output region (NOTE [fresh inputs])
//   last                                     -> {outputs, region}
// While a request runs, the contestant may send store requests
// (worker/proxy_store.h), which the referee answers first.
#include "worker/contestant.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <optional>

#ifdef PKB_HAVE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>
#endif

#include "common/error_text.h"
#include "common/exit_codes.h"
#include "common/outcome.h"
#include "common/plugin_loader.h"
#include "common/topology_io.h"
#include "pkb/check.h"
#include "worker/control_channel.h"
#include "worker/nccl_guard.h"
#include "worker/peers.h"
#include "worker/proxy_store.h"
#include "worker/route_guard.h"
#include "worker/sandbox.h"
#include "worker/tensor_transfer.h"
#include "worker/timing.h"
#include "worker/worker_context.h"

namespace pkb {

namespace {

class ContestantPeers final : public RankPeers {
 public:
  ContestantPeers(ControlChannel& ch, int rank, int world, at::Device device, bool shared)
      : rank_(rank), world_(world), device_(device), shared_(shared), store_(c10::make_intrusive<ProxyStore>(ch)) {}
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  at::Device device() const override { return device_; }
  bool shared_gpu() const override { return shared_; }
  c10d::Store& store() override { return *store_; }
  c10::intrusive_ptr<c10d::Store> store_ptr() override { return store_; }
  // The referees meet just before each segment (NOTE [timing protocol],
  // step 5); the gate's opening skew across GPUs lands in the first sample.
  void align_streams() override {}

 private:
  int rank_, world_;
  at::Device device_;
  bool shared_;
  c10::intrusive_ptr<c10d::Store> store_;
};

class Contestant {
 public:
  explicit Contestant(ControlChannel& ch) : ch_(ch) {}

  int serve() {
    for (;;) {
      Json req;
      ch_.recv(&req, &fds_);
      const std::string op = req.value("op", "");
      if (op == "exit") return 0;
      Json reply;
      try {
        reply = handle(op, req);
      } catch (const CandidateFailure& f) {
        reply = {{"error", f.reason}, {"outcome", outcome_name(f.outcome)}};
      } catch (const std::exception& e) {
        reply = {{"error", error_text(e)}, {"outcome", outcome_name(Outcome::kRuntimeError)}};
      }
      for (int f : fds_) close(f);
      fds_.clear();
      ch_.send(reply, reply_fds_);
      reply_fds_.clear();
    }
  }

 private:
  Json handle(const std::string& op, const Json& req) {
    if (op == "setup") return setup(req);
    if (op == "load") return load(req);
    if (op == "region") {
      int fd = fds_.empty() ? -1 : fds_.front();
      if (!fds_.empty()) fds_.erase(fds_.begin());
      regions_[req.at("id").get<int>()] = SharedRegion::open(req.at("desc"), fd, peers_->device());
      return {{"ok", true}};
    }
    if (op == "drop_region") {
      regions_.erase(req.at("id").get<int>());
      return {{"ok", true}};
    }
    if (op == "call") {
      Inputs in = inputs_from(req.at("inputs"), region_of(), req.at("region").get<int>());
      return outputs_reply(run_checked(in));
    }
    if (op == "groups") {
      std::vector<Inputs> groups;
      for (const auto& g : req.at("groups")) groups.push_back(inputs_from(g.at("inputs"), region_of(), g.at("region").get<int>()));
      // New descriptors for the same side keep its kept-output storage.
      if (!side_) side_ = std::make_unique<LocalSide>(*peers_, [this](const Inputs& in) { return run(in); });
      side_->set_groups(std::move(groups));
      return {{"ok", true}};
    }
    if (op == "warm") {
      PKB_CHECK(side_, "no timing groups");
      side_->warm(req.at("calls").get<int>(), req.value("start", -1));
      check_device();
      return {{"ok", true}};
    }
    if (op == "segment") {
      PKB_CHECK(side_, "no timing groups");
      SegmentSpec s;
      s.iters = req.at("iters").get<int>();
      s.tag = req.at("tag").get<std::string>();
      s.gate_ms = req.at("gate_ms").get<double>();
      s.record = req.at("record").get<bool>();
      s.host_sync = req.at("host_sync").get<bool>();
      s.start = req.value("start", -1);
      s.keep = req.value("keep", false);
      s.barrier = false;  // the referees met (NOTE [timing protocol], step 5)
      SegmentReport r = side_->segment(s);
      check_device();
      Json reply = {{"samples", r.samples}, {"span_us", r.span_us}, {"wall_us", r.wall_us}, {"timed_out", r.timed_out}};
      if (s.keep) kept_reply(side_->kept_all(), s.iters, &reply);
      return reply;
    }
    if (op == "last") {
      PKB_CHECK(side_, "no timing groups");
      return outputs_reply(side_->last_outputs());
    }
    PKB_CHECK(false, "unknown request '", op, "'");
  }

  Json setup(const Json& req) {
    const int rank = req.at("rank").get<int>(), world = req.at("world").get<int>();
    at::Device device = at::kCPU;
    if (req.at("device").get<std::string>() == "cuda") {
#ifdef PKB_HAVE_CUDA
      device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(req.at("gpu").get<int>()));
      c10::cuda::set_device(device.index());
#else
      PKB_CHECK(false, "no CUDA in this build");
#endif
    }
    const bool shared = req.value("shared_gpu", false);
    peers_ = std::make_unique<ContestantPeers>(ch_, rank, world, device, shared);
#ifdef PKB_HAVE_CUDA
    if (device.is_cuda()) {
      at::empty({1}, at::TensorOptions().device(device));  // the context, before any drop
      if (!shared) {
        // PyTorch's symmetric memory resolves its group by name; this one
        // has no backend (contestants have no collectives), only the store.
        auto pg = c10::make_intrusive<c10d::ProcessGroup>(peers_->store_ptr(), rank, world);
        c10d::register_process_group("pkb", pg);
        group_ = pg;
        c10d::symmetric_memory::set_group_info("pkb", rank, world, peers_->store_ptr());
        CandidateRoutes::set_group("pkb");
      }
    }
#endif
    ctx_ = std::make_unique<WorkerContext>(*peers_, topology_from_json(req.value("topology", Json::object())));
    Json reply = {{"ok", true}};
    reply["isolation"] = isolate(req, device);
    reply["uid"] = static_cast<int>(getuid());
    return reply;
  }

  // NOTE [referee and contestant]: a network namespace of its own, then the
  // unprivileged user, before any candidate code is loaded.
  Json isolate(const Json& req, const at::Device& device) {
    Json iso = Json::object();
    if (req.value("isolate_net", false)) {
      bool ok = unshare(CLONE_NEWNET) == 0;
      iso["network"] = ok ? "own namespace (no interfaces up)" : std::string("shared: unshare failed: ") + strerror(errno);
    } else {
      iso["network"] = "shared (not root)";
    }
    const int uid = req.value("uid", -1);
    if (uid >= 0) {
      if (device.is_cuda()) iso["preloaded_libraries"] = preload_lazy_libraries();
      std::string why = drop_privileges(uid, req.value("gid", -1));
      PKB_CHECK(why.empty(), "cannot drop privileges: ", why);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(kWorkerExitHarnessError);
    return iso;
  }

  Json load(const Json& req) {
    try {
      solve_ = load_solution_plugin(req.at("candidate").get<std::string>()).solve;
    } catch (const LoadError& e) {
      throw CandidateFailure{Outcome::kLoadError, e.what()};
    }
    return {{"ok", true}};
  }

  std::function<SharedRegion&(int)> region_of() {
    return [this](int id) -> SharedRegion& { return region(id); };
  }
  SharedRegion& region(int id) {
    auto it = regions_.find(id);
    PKB_CHECK(it != regions_.end(), "no region ", id);
    return *it->second;
  }

  Outputs run(const Inputs& in) {
    PKB_CHECK(solve_, "no candidate loaded");
    Outputs out;
    std::optional<CandidateFailure> threw;
    try {
      CandidateRoutes::Hidden hidden;  // NOTE [forbidden routes]
      out = solve_(*ctx_, in);
    } catch (const std::exception& e) {
      threw = CandidateFailure{Outcome::kRuntimeError, "candidate threw: " + error_text(e)};
    } catch (...) {
      threw = CandidateFailure{Outcome::kRuntimeError, "candidate threw a non-standard exception"};
    }
    if (const char* f = nccl_guard::take_violation())
      throw CandidateFailure{Outcome::kForbiddenApi,
                             std::string("the candidate called ") + f +
                                 " while it ran (NCCL reached by a route the static checks do not see; NOTE [NCCL "
                                 "calls counted])"};
    if (threw) throw *threw;
    return out;
  }

  void check_device() {
    try {
      peers_->device_sync();
    } catch (const std::exception& e) {
      throw CandidateFailure{Outcome::kRuntimeError, "device error after candidate: " + error_text(e)};
    }
  }

  Outputs run_checked(const Inputs& in) {
    Outputs out = run(in);
    check_device();
    return out;
  }

  // Every call's kept outputs (NOTE [fresh inputs], step 2) in the output
  // region, one list of descriptors per call: the referee picks the calls it
  // checks after this reply.
  void kept_reply(const std::vector<Outputs>& kept, int calls, Json* reply) {
    PKB_CHECK(static_cast<int>(kept.size()) >= calls, "kept ", kept.size(), " calls' outputs of ", calls);
    Outputs flat;
    Json counts = Json::array();
    for (int i = 0; i < calls; ++i) {
      flat.insert(flat.end(), kept[i].begin(), kept[i].end());
      counts.push_back(kept[i].size());
    }
    Json placed = outputs_reply(flat);
    if (placed.contains("new_region")) (*reply)["new_region"] = placed["new_region"];
    Json per_call = Json::array();
    size_t at = 0;
    for (const auto& n : counts) {
      Json d = Json::array();
      for (size_t j = 0; j < n.get<size_t>(); ++j) d.push_back(placed["outputs"][at++]);
      per_call.push_back(d);
    }
    (*reply)["kept"] = per_call;
  }

  // The outputs, placed in this process's output region (grown as needed).
  Json outputs_reply(const Outputs& out) {
    size_t need = region_bytes_for(out);
    Json reply = Json::object();
    if (!out_region_ || out_region_->bytes() < need) {
      out_region_ = SharedRegion::create(need + need / 4, peers_->device());
      reply["new_region"] = out_region_->describe();
      if (out_region_->fd() >= 0) reply_fds_.push_back(out_region_->fd());
    }
    try {
      reply["outputs"] = place_outputs(out, *out_region_);
    } catch (const std::exception& e) {
      throw CandidateFailure{Outcome::kRuntimeError, "the candidate's outputs could not be copied: " + error_text(e)};
    }
    return reply;
  }

  ControlChannel& ch_;
  std::vector<int> fds_, reply_fds_;
  std::unique_ptr<ContestantPeers> peers_;
  std::unique_ptr<WorkerContext> ctx_;
  c10::intrusive_ptr<c10::intrusive_ptr_target> group_;
  std::map<int, std::shared_ptr<SharedRegion>> regions_;
  std::shared_ptr<SharedRegion> out_region_;
  std::unique_ptr<LocalSide> side_;
  SolveFn solve_ = nullptr;
};

}  // namespace

int contestant_main(int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) _exit(kWorkerExitHarnessError);
  int code = 0;
  {
    ControlChannel ch(fd);
    Contestant c(ch);
    try {
      code = c.serve();
    } catch (const ChannelClosed&) {
      code = 0;  // the referee is done with it
    } catch (const std::exception& e) {
      fprintf(stderr, "pkb contestant: %s\n", e.what());
      code = kWorkerExitHarnessError;
    }
  }
  fflush(stdout);
  fflush(stderr);
  _exit(code);
}

}  // namespace pkb
