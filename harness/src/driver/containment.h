// What keeps a candidate inside its evaluation (issue 11 item 5).
//
// NOTE [untrusted candidates]
// A candidate is code from a model that may look for shortcuts or attack the
// run. What pkb defends, and how (tests/fixtures/attacks has one candidate
// per attack; tests/e2e/attacks.sh runs them):
//  - Answers that ignore the data (rank-only formulas, cached answers, caches
//    keyed on pointers or call counts): integrity trials, the in-place
//    refresh after timing (NOTE [integrity trials], pkb/integrity.h).
//  - Clobbering an input after computing the output: the input-mutation
//    check (output_mismatch naming the input).
//  - Routes to NCCL/c10d/Gloo other than direct imports: static checks of the
//    .so (imports of the operator dispatcher, the process-group registry, the
//    loader's object walkers; strings naming c10d ops or /proc/self/maps),
//    and at run time no process group is registered by name while the
//    candidate runs on GPU, and NCCL calls made while it runs are counted
//    (NOTE [forbidden routes], candidate_build.h; NOTE [NCCL calls counted]).
//  - Processes the candidate starts: the driver is a child subreaper
//    (PR_SET_CHILD_SUBREAPER), so every orphan, setsid() or not, becomes its
//    child; after each evaluation it kills and reaps every descendant it has
//    (repeatedly, until none is left), and records how many in
//    process.strays_killed.
//  - Hangs and early exits: NOTE [phase deadlines] (driver/phase_watch.h) and
//    the launcher's result-file check.
//  - The verdict, the record and the times (NOTE [referee and contestant],
//    worker/contestant.h): each rank is two processes. The candidate runs in
//    the contestant, which holds no store connection, no result or job file
//    and no mapping of the referee's memory; the referee (which loads the
//    problem, draws the inputs, runs and times the reference, compares, and
//    writes rank_<r>.json) trusts nothing the contestant says beyond its
//    outputs and its claimed event times, which it checks against its own
//    clock (NOTE [timing protocol], step 5). The reference is timed while
//    the contestant's processes are stopped, and only once the device is
//    quiet: what they left queued on the GPU (or a process of theirs with a
//    CUDA context of its own has) is waited for in the contestant's account,
//    and still busy after 1 s is timing_anomaly (NOTE [quiet device],
//    worker/quiet_device.h). A result file counts only from a referee that
//    ended by itself.
//  - The driver and the results file. The driver is not dumpable
//    (PR_SET_DUMPABLE 0: no /proc/<driver>/fd, environ, mem for other
//    processes of its user). When pkb runs as root, the referees stay root
//    and each contestant drops to an unprivileged user (nobody;
//    --worker-user) after its set-up and before the candidate is loaded, in a
//    network namespace of its own: it cannot signal, trace or read the
//    referee or the driver, open their files, write the evaluation directory
//    (0711 while it runs: it may only pass through to its own folder,
//    contestant/, where a copy of the candidate lies, since the cache under
//    /root is not readable to nobody), or reach the store or any port. On
//    GPU the libraries torch loads on first use are loaded before the drop
//    (worker/sandbox.h). Measured on the GPU (resolve_worker_user below).
//    When pkb does not run as root, contestants run as the driver's user,
//    the referee is not dumpable (its memory and file descriptors are closed
//    to them), and what still holds is this: a candidate can kill or stop
//    its referee (its rank then has no result: runtime_error, or timeout when
//    stopped; a result file it wrote meanwhile is ignored), kill the driver
//    (kill(getppid()) of its referee's parent), open files by path (a
//    rank_<r>.json it writes is replaced by the referee's own, written after
//    the contestant has ended), rewrite the cache of compiled candidates
//    (~/.cache/pkb/candidates: a later run of the same source would load
//    what it left there; as nobody it cannot), and reach the store over the
//    loopback (its keys decide nothing it can forge without speaking c10d's
//    protocol: not defended). Then: the results file is checked after every evaluation
//    (inode, size and ctime, which no one can set back) and rewritten from
//    the driver's own copy when anything else touched it, and that
//    evaluation's record becomes forbidden_api ("wrote the results file"); a
//    driver killed loses nothing already written (each record is one write
//    plus fsync), and `--resume` continues, recording the evaluation that was
//    in flight (<out>.inflight) as runtime_error instead of running it again.
// Not defended: the candidate's own outputs and timing claims are its to
// compute (integrity trials and the referee's clock bound what a fake gains,
// within the allowance of NOTE [timing protocol], step 5); it can reach
// other users' world-writable files; on GPU a kernel can scribble on its
// peers' memory through the symmetric buffers (that is the interface), and a
// kernel it left running keeps running while the reference is timed (the
// contestant's processes are stopped, its GPU work is not: no probe of the
// device between the segments yet); without root, killing the driver is only
// recovered from, not prevented; processes a candidate gets started outside
// its tree (a daemon asked to spawn one) are not contained.
#pragma once

#include <sys/types.h>

#include <string>

namespace pkb {

// The driver's hardening: child subreaper, not dumpable. Idempotent.
void harden_driver();

// SIGKILLs and reaps every descendant of this process; returns how many.
int kill_descendants();

// The unprivileged user workers drop to when pkb runs as root; uid -1 when
// pkb is not root or the user does not exist (then nothing is dropped).
struct WorkerUser {
  int uid = -1, gid = -1;
  std::string name;
};
WorkerUser worker_user(const std::string& name);
// --worker-user "auto": "nobody" on CPU and CUDA. Measured on an H200
// (2026-12-01): every reference (86 problems, 68 left out) correct with two
// ranks sharing the GPU as nobody (Gloo over CUDA tensors, CUDA IPC buffers,
// cuDNN/cuFFT/flash loaded before the drop), and the GPU attack fixtures.
// One GPU per rank (NCCL, PyTorch symmetric memory) as nobody is measured at
// W = 1 only; --worker-user '' keeps the driver's user should it fail there.
std::string resolve_worker_user(const std::string& requested, const std::string& device);

// An evaluation directory: the worker user's during the evaluation (so its
// ranks can write their results) and root's, 0700, afterwards.
void open_eval_dir(const std::string& dir, const WorkerUser& u);
void close_eval_dir(const std::string& dir, const WorkerUser& u);

}  // namespace pkb
