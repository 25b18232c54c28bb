// See calibrate.h. One rank's plan:
//   1. this GPU alone: kernel launch latency, HBM (copy kernel, and the copy
//      engine for comparison), dense bf16 GEMM;
//   2. with peers: every rank says through the store whether it is healthy and
//      can reach every peer; only if all can, the collective steps follow;
//   3. NVLink: for each shift d in 1..W-1, rank r moves a buffer to or from
//      rank (r + d) % W, in mode "both" (every rank at once, so every link
//      carries both directions, as collectives load them) and mode "one" (rank
//      0 only, its peer idle), by SM loads, SM stores (several grid sizes), and
//      the copy engine (cudaMemcpyAsync pull and push on the peer-mapped
//      symmetric buffer);
//   4. the cross-GPU barrier: pkb::device::block_barrier in a loop inside one
//      kernel, and SymmetricBuffer::barrier() per call.
// Before every timed repeat of a collective step, the ranks align their
// streams (a one-element NCCL all-reduce, Distributed::align_streams), and
// every rank makes the same calls whatever fails on it, so none waits forever
// for another. Buffers are many times L2 (so no timed byte comes from L2);
// each number is the median of the repeats after warm-ups.
#include "worker/calibrate.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "common/error_text.h"
#include "common/calibration.h"
#include "common/exit_codes.h"
#include "common/files.h"
#include "common/outcome.h"
#include "pkb/check.h"
#include "worker/worker.h"

#ifdef PKB_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "worker/calibrate_kernels.h"
#include "worker/distributed.h"
#include "worker/stream_gate.h"
#include "worker/symmetric.h"
#endif

namespace pkb {

namespace {

void log_line(int rank, const std::string& s) {
  std::printf("[calibrate rank %d] %s\n", rank, s.c_str());
  std::fflush(stdout);
}

#ifdef PKB_HAVE_CUDA

using Clock = std::chrono::steady_clock;
constexpr size_t kMiB = size_t{1} << 20;

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

class EventPairs {
 public:
  EventPairs(cudaStream_t s, int n) : s_(s), ev_(2 * static_cast<size_t>(n), nullptr) {
    for (auto& e : ev_) PKB_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~EventPairs() {
    for (auto e : ev_)
      if (e) cudaEventDestroy(e);
  }
  EventPairs(const EventPairs&) = delete;
  EventPairs& operator=(const EventPairs&) = delete;
  void start(int i) { PKB_CUDA_CHECK(cudaEventRecord(ev_[2 * i], s_)); }
  void stop(int i) { PKB_CUDA_CHECK(cudaEventRecord(ev_[2 * i + 1], s_)); }
  double us(int i) const {
    float ms = 0;
    PKB_CUDA_CHECK(cudaEventElapsedTime(&ms, ev_[2 * i], ev_[2 * i + 1]));
    return ms * 1e3;
  }

 private:
  cudaStream_t s_;
  std::vector<cudaEvent_t> ev_;
};

// `op` runs warmup + reps times on stream `s`, the last `reps` between CUDA
// events. `align`, when set, runs before every run, also after `op` failed,
// so that every rank of a collective step makes the same calls.
Json measure(cudaStream_t s, int warmup, int reps, const std::function<void()>& op,
             const std::function<void()>& align) {
  EventPairs ev(s, reps);
  std::string err;
  for (int i = 0; i < warmup + reps; ++i) {
    if (align) align();
    if (!err.empty()) continue;
    try {
      if (i >= warmup) ev.start(i - warmup);
      op();
      if (i >= warmup) ev.stop(i - warmup);
    } catch (const std::exception& e) {
      err = error_text(e);
      cudaGetLastError();  // a non-sticky error must not be reported again by the next check
    }
  }
  PKB_CUDA_CHECK(cudaStreamSynchronize(s));
  if (!err.empty()) return Json{{"error", err}};
  std::vector<double> us(reps);
  for (int i = 0; i < reps; ++i) us[i] = ev.us(i);
  return Json{{"samples_us", us}, {"median_us", median_of(us)}};
}

// Adds "rate" (work per second at the median) to a measurement.
Json with_rate(Json m, double work) {
  if (m.contains("median_us") && m["median_us"].get<double>() > 0) m["rate"] = work / (m["median_us"].get<double>() * 1e-6);
  return m;
}

class Calibration {
 public:
  Calibration(Distributed& dist, const Json& job) : dist_(dist), job_(job), rank_(dist.rank()), world_(dist.world()) {
    dev_ = dist.device().index();
    stream_ = c10::cuda::getCurrentCUDAStream(dev_).stream();
    warmup_ = job.value("warmup", 3);
    reps_ = job.value("reps", 10);
    PKB_CHECK(warmup_ >= 0 && reps_ >= 1, "calibrate: bad warmup/reps");
    PKB_CUDA_CHECK(cudaGetDeviceProperties(&prop_, dev_));
  }

  Json run() {
    Json c;
    c["rank"] = rank_;
    c["gpu"] = gpu_info();
    step(c, "launch", [&] { return launch(); });
    step(c, "hbm", [&] { return hbm(); });
    step(c, "gemm", [&] { return gemm(); });
    if (world_ >= 2) peers(c);
    return c;
  }

 private:
  template <typename F>
  void step(Json& c, const char* name, F fn) {
    auto t0 = Clock::now();
    try {
      c[name] = fn();
    } catch (const std::exception& e) {
      c[name] = Json{{"error", error_text(e)}};
      cudaGetLastError();
    }
    c[name]["seconds"] = us_since(t0) * 1e-6;
    log_line(rank_, std::string(name) + ": " + (c[name].contains("error") ? "error: " + c[name]["error"].get<std::string>() : "done") +
                        " (" + std::to_string(c[name]["seconds"].get<double>()) + " s)");
  }

  Json gpu_info() {
    Json g;
    g["index"] = dev_;
    g["name"] = prop_.name;
    g["sm_count"] = prop_.multiProcessorCount;
    g["l2_bytes"] = prop_.l2CacheSize;
    g["memory_bytes"] = prop_.totalGlobalMem;
    g["compute_capability"] = std::to_string(prop_.major) + "." + std::to_string(prop_.minor);
    g["memory_bus_bits"] = prop_.memoryBusWidth;
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, dev_) == cudaSuccess) g["sm_clock_khz"] = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, dev_) == cudaSuccess) g["memory_clock_khz"] = v;
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), dev_) == cudaSuccess) g["pci_bus_id"] = bus;
    if (cudaDriverGetVersion(&v) == cudaSuccess) g["cuda_driver_version"] = v;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess) g["cuda_runtime_version"] = v;
    cudaGetLastError();
    return g;
  }

  // Several times L2, at least `floor` bytes, in whole MiB.
  size_t big_bytes(const char* key, size_t floor, size_t times_l2) const {
    size_t b = job_.value(key, size_t{0});
    if (b == 0) b = std::max(floor, times_l2 * static_cast<size_t>(std::max(prop_.l2CacheSize, 0)));
    return (b + kMiB - 1) / kMiB * kMiB;
  }

  std::vector<int> grid_sizes() const {
    int sm = std::max(1, prop_.multiProcessorCount);
    return {sm, 2 * sm, 4 * sm};
  }

  Json launch() {
    Json j;
    constexpr int kBatch = 256, kReps = 20;
    // GPU time per launch: a batch enqueued behind a closed gate runs back to back.
    {
      StreamGate gate;
      EventPairs ev(stream_, kReps);
      bool timed_out = false;
      std::vector<double> per;
      for (int i = -2; i < kReps; ++i) {
        gate.close(stream_, 2000.0);
        if (i >= 0) ev.start(i);
        for (int k = 0; k < kBatch; ++k) calib::launch_empty(stream_);
        if (i >= 0) ev.stop(i);
        gate.open();
        PKB_CUDA_CHECK(cudaStreamSynchronize(stream_));
        timed_out |= gate.timed_out();
      }
      for (int i = 0; i < kReps; ++i) per.push_back(ev.us(i) / kBatch);
      j["gpu_back_to_back"] = {{"batch", kBatch}, {"samples_us", per}, {"gate_timed_out", timed_out}};
      j["gpu_back_to_back_us"] = median_of(per);
    }
    Json pair = measure(stream_, 5, 50, [&] { calib::launch_empty(stream_); }, nullptr);
    j["event_pair"] = pair;
    if (pair.contains("median_us")) j["event_pair_us"] = pair["median_us"];
    std::vector<double> enq, rt;
    for (int i = -2; i < kReps; ++i) {
      PKB_CUDA_CHECK(cudaStreamSynchronize(stream_));
      auto t0 = Clock::now();
      for (int k = 0; k < kBatch; ++k) calib::launch_empty(stream_);
      double us = us_since(t0);
      PKB_CUDA_CHECK(cudaStreamSynchronize(stream_));
      if (i >= 0) enq.push_back(us / kBatch);
    }
    for (int i = -5; i < 50; ++i) {
      auto t0 = Clock::now();
      calib::launch_empty(stream_);
      PKB_CUDA_CHECK(cudaStreamSynchronize(stream_));
      double us = us_since(t0);
      if (i >= 0) rt.push_back(us);
    }
    j["host_enqueue"] = {{"batch", kBatch}, {"samples_us", enq}};
    j["host_enqueue_us"] = median_of(enq);
    j["host_roundtrip"] = {{"samples_us", rt}};
    j["host_roundtrip_us"] = median_of(rt);
    return j;
  }

  Json hbm() {
    const size_t bytes = big_bytes("hbm_bytes", 1024 * kMiB, 16);
    auto opts = at::TensorOptions().dtype(at::kFloat).device(dist_.device());
    at::Tensor src = at::empty({static_cast<int64_t>(bytes / 4)}, opts).normal_();
    at::Tensor dst = at::empty_like(src);
    Json j;
    j["bytes"] = bytes;
    j["bytes_moved"] = 2.0 * bytes;  // read + written
    j["method"] = "dst = src, bytes read + written per second";
    j["tests"] = Json::array();
    for (int blocks : grid_sizes()) {
      Json m = measure(stream_, warmup_, reps_,
                       [&] { calib::launch_copy(dst.data_ptr(), src.data_ptr(), bytes, blocks, stream_); }, nullptr);
      m = with_rate(m, 2.0 * bytes);
      m["method"] = "sm_copy";
      m["blocks"] = blocks;
      m["threads"] = calib::kCopyThreads;
      j["tests"].push_back(m);
    }
    Json ce = measure(stream_, warmup_, reps_, [&] {
      PKB_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, cudaMemcpyDeviceToDevice, stream_));
    }, nullptr);
    ce = with_rate(ce, 2.0 * bytes);
    ce["method"] = "copy_engine";
    j["tests"].push_back(ce);
    PKB_CHECK(at::equal(dst, src), "HBM copy: destination differs from source after the copies");
    return j;
  }

  Json gemm() {
    const int64_t n = job_.value("gemm_n", int64_t{8192});
    at::manual_seed(1234 + rank_);
    auto opts = at::TensorOptions().dtype(at::kBFloat16).device(dist_.device());
    at::Tensor a = at::randn({n, n}, opts), b = at::randn({n, n}, opts), c;
    Json m = measure(stream_, warmup_, reps_, [&] { c = at::matmul(a, b); }, nullptr);
    const double flops = 2.0 * n * n * n;
    m = with_rate(m, flops);
    m["method"] = "at::matmul, bf16";
    m["m"] = n;
    m["n"] = n;
    m["k"] = n;
    m["flops"] = flops;
    if (c.defined()) m["finite"] = c.isfinite().all().item<bool>();
    return m;
  }

  // Whether every rank can go on to the collective steps; the same answer on every rank.
  std::string peers_ready() {
    std::string status = "ok";
    try {
      if (!job_.value("peer_access", true)) status = "NVML reports that not every GPU pair is peer-accessible";
      const Json& gpus = job_.value("gpu_of_rank", Json::array());
      for (int r = 0; status == "ok" && r < world_ && r < static_cast<int>(gpus.size()); ++r) {
        int other = gpus[r].get<int>();
        if (other == dev_) continue;
        int can = 0;
        PKB_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, dev_, other));
        if (!can) status = "GPU " + std::to_string(dev_) + " cannot access GPU " + std::to_string(other);
      }
      if (status == "ok") PKB_CUDA_CHECK(cudaDeviceSynchronize());
    } catch (const std::exception& e) {
      status = error_text(e);
      cudaGetLastError();
    }
    auto all = dist_.exchange("calibrate/peers", status);
    for (int r = 0; r < world_; ++r)
      if (all[r] != "ok") return "rank " + std::to_string(r) + ": " + all[r];
    return "";
  }

  void peers(Json& c) {
    std::string why = peers_ready();
    if (!why.empty()) {
      c["nvlink"] = {{"skipped", why}};
      c["barrier"] = {{"skipped", why}};
      log_line(rank_, "peer steps skipped: " + why);
      return;
    }
    const size_t bytes = big_bytes("nvlink_bytes", 256 * kMiB, 4);
    // Left allocated on purpose: the process ends right after (as the worker
    // does, without destructors), and nothing frees memory a peer may map.
    SymmetricBuffer* buf = make_cuda_symmetric(dist_, "calibrate", bytes).release();
    step(c, "nvlink", [&] { return nvlink(*buf); });
    step(c, "barrier", [&] { return barrier(*buf); });
    dist_.device_sync();
    dist_.store_barrier("calibrate/done");
  }

  Json nvlink(SymmetricBuffer& buf) {
    const size_t bytes = buf.size_bytes();
    at::Tensor local = at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte).device(dist_.device()));
    local.random_();
    auto align = [&] { dist_.align_streams(); };
    Json j;
    j["bytes"] = bytes;
    j["tests"] = Json::array();
    for (int d = 1; d < world_; ++d) {
      for (const char* mode : {"both", "one"}) {
        const bool one = std::string(mode) == "one";
        const bool active = !one || rank_ == 0;
        const int peer = one ? d : (rank_ + d) % world_;
        void* remote = active ? buf.peer_ptr(peer) : nullptr;
        auto record = [&](Json m, const char* mech, int blocks) {
          if (active) m = with_rate(m, static_cast<double>(bytes));
          m["mechanism"] = mech;
          m["mode"] = mode;
          m["shift"] = d;
          m["peer"] = active ? peer : -1;
          m["active"] = active;
          if (blocks > 0) m["blocks"] = blocks;
          j["tests"].push_back(m);
        };
        for (const char* mech : {"sm_load", "sm_store"}) {
          const bool load = std::string(mech) == "sm_load";
          for (int blocks : grid_sizes()) {
            Json m = measure(stream_, warmup_, reps_, [&] {
              if (!active) return;
              if (load) calib::launch_copy(local.data_ptr(), remote, bytes, blocks, stream_);
              else calib::launch_copy(remote, local.data_ptr(), bytes, blocks, stream_);
            }, align);
            record(m, mech, blocks);
          }
        }
        for (const char* mech : {"ce_pull", "ce_push"}) {
          const bool pull = std::string(mech) == "ce_pull";
          Json m = measure(stream_, warmup_, reps_, [&] {
            if (!active) return;
            if (pull) PKB_CUDA_CHECK(cudaMemcpyAsync(local.data_ptr(), remote, bytes, cudaMemcpyDeviceToDevice, stream_));
            else PKB_CUDA_CHECK(cudaMemcpyAsync(remote, local.data_ptr(), bytes, cudaMemcpyDeviceToDevice, stream_));
          }, align);
          record(m, mech, 0);
        }
      }
    }
    return j;
  }

  Json barrier(SymmetricBuffer& buf) {
    auto align = [&] { dist_.align_streams(); };
    Json j;
    constexpr int kIters = 1000, kCalls = 100;
    Json dev = measure(stream_, 1, 5, [&] {
      calib::launch_barrier_loop(buf.signal_pads_device(), rank_, world_, kIters, stream_);
    }, align);
    if (dev.contains("median_us")) dev["median_us"] = dev["median_us"].get<double>() / kIters;
    dev["barriers_per_sample"] = kIters;
    j["device"] = dev;
    Json st = measure(stream_, 1, 5, [&] {
      for (int i = 0; i < kCalls; ++i) buf.barrier(0);
    }, align);
    if (st.contains("median_us")) st["median_us"] = st["median_us"].get<double>() / kCalls;
    st["calls_per_sample"] = kCalls;
    j["stream"] = st;
    return j;
  }

  Distributed& dist_;
  const Json& job_;
  int rank_, world_;
  int dev_ = 0;
  cudaStream_t stream_ = nullptr;
  int warmup_ = 3, reps_ = 10;
  cudaDeviceProp prop_{};
};

#endif  // PKB_HAVE_CUDA

}  // namespace

int calibrate_worker(const Json& job, int rank, int world) {
  Json result{{"rank", rank}, {"pid", static_cast<int>(getpid())}};
  int code = kWorkerExitOk;
  try {
#ifdef PKB_HAVE_CUDA
    PKB_CHECK(job.value("device", "") == "cuda", "calibrate runs on GPUs only");
    int gpu = rank;
    if (job.contains("gpu_of_rank") && rank < static_cast<int>(job["gpu_of_rank"].size())) gpu = job["gpu_of_rank"][rank];
    DistributedOptions o;
    o.rank = rank;
    o.world = world;
    o.device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(gpu));
    o.master_addr = std::getenv("MASTER_ADDR") ? std::getenv("MASTER_ADDR") : "127.0.0.1";
    o.master_port = std::getenv("MASTER_PORT") ? std::atoi(std::getenv("MASTER_PORT")) : 29500;
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(job.value("timeout_s", 120.0) * 1000));
    int count = 0;
    PKB_CUDA_CHECK(cudaGetDeviceCount(&count));
    PKB_CHECK(gpu < count, "rank ", rank, " was given GPU ", gpu, " but only ", count, " are visible");
    log_line(rank, "GPU " + std::to_string(gpu) + " of " + std::to_string(count) + ", world " + std::to_string(world));
    // Never destroyed: the process ends with _exit (worker_main), as an
    // evaluation's does, so no backend teardown can hang after the result.
    Distributed& dist = *new Distributed(o);
    Calibration cal(dist, job);
    result["calibration"] = cal.run();
    result["outcome"] = outcome_name(Outcome::kCorrect);
    result["reason"] = "";
#else
    PKB_CHECK(false, "this pkb was built without the GPU path (no CUDA toolkit at configure time): nothing to calibrate");
#endif
  } catch (const std::exception& e) {
    result["outcome"] = outcome_name(Outcome::kHarnessError);
    result["reason"] = "calibrate: " + error_text(e);
    log_line(rank, result["reason"].get<std::string>());
    code = kWorkerExitHarnessError;
  }
  try {
    write_file_atomic(job.at("result_dir").get<std::string>() + "/rank_" + std::to_string(rank) + ".json",
                      result.dump(2), true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pkb worker: cannot write the calibration result: %s\n", e.what());
    code = kWorkerExitHarnessError;
  }
  return code;
}

}  // namespace pkb
