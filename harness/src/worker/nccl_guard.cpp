// NOTE [NCCL calls counted] (worker/nccl_guard.h).
#include "worker/nccl_guard.h"

#include <atomic>

#ifdef PKB_HAVE_CUDA
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#endif

namespace pkb::nccl_guard {

namespace {
std::atomic<bool> g_window{false};
std::atomic<const char*> g_violation{nullptr};
std::atomic<uint64_t> g_calls{0};
}  // namespace

void set_window(bool open) { g_window.store(open, std::memory_order_seq_cst); }

const char* take_violation() { return g_violation.exchange(nullptr); }

uint64_t calls() { return g_calls.load(); }

#ifdef PKB_HAVE_CUDA
bool active() { return true; }

namespace {

void note_call(const char* name) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  if (!g_window.load(std::memory_order_relaxed)) return;
  const char* none = nullptr;
  g_violation.compare_exchange_strong(none, name);
}

// NCCL's own entry point: pnccl<Name>, the profiling hook, which is the real
// function (ncclXxx is a weak alias of it in libnccl); else the next ncclXxx
// after the executable's (an NCCL without the hooks).
void* forward(const char* pname) {
  void* f = dlsym(RTLD_DEFAULT, pname);
  if (!f) f = dlsym(RTLD_NEXT, pname + 1);
  if (!f) {
    std::fprintf(stderr, "pkb: NCCL has neither %s nor %s (NOTE [NCCL calls counted]); aborting\n", pname, pname + 1);
    std::abort();
  }
  return f;
}

}  // namespace
#else
bool active() { return false; }
#endif

}  // namespace pkb::nccl_guard

#ifdef PKB_HAVE_CUDA
// One interposer per entry point: count, then call pnccl<Name> (resolved once).
#define PKB_NCCL_INTERPOSE(name, params, args)                                         \
  extern "C" __attribute__((visibility("default"))) ncclResult_t nccl##name params {   \
    pkb::nccl_guard::note_call("nccl" #name);                                          \
    using Fn = ncclResult_t(*) params;                                                 \
    static Fn real = reinterpret_cast<Fn>(pkb::nccl_guard::forward("pnccl" #name));    \
    return real args;                                                                  \
  }

PKB_NCCL_INTERPOSE(AllReduce,
                   (const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st),
                   (s, r, n, t, op, c, st))
PKB_NCCL_INTERPOSE(Reduce,
                   (const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,
                    cudaStream_t st),
                   (s, r, n, t, op, root, c, st))
PKB_NCCL_INTERPOSE(Bcast, (void* b, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st),
                   (b, n, t, root, c, st))
PKB_NCCL_INTERPOSE(Broadcast,
                   (const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st),
                   (s, r, n, t, root, c, st))
PKB_NCCL_INTERPOSE(ReduceScatter,
                   (const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st),
                   (s, r, n, t, op, c, st))
PKB_NCCL_INTERPOSE(AllGather, (const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st),
                   (s, r, n, t, c, st))
PKB_NCCL_INTERPOSE(Send, (const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st),
                   (s, n, t, peer, c, st))
PKB_NCCL_INTERPOSE(Recv, (void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st),
                   (r, n, t, peer, c, st))
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
PKB_NCCL_INTERPOSE(AlltoAll, (const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st),
                   (s, r, n, t, c, st))
PKB_NCCL_INTERPOSE(Gather,
                   (const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st),
                   (s, r, n, t, root, c, st))
PKB_NCCL_INTERPOSE(Scatter,
                   (const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st),
                   (s, r, n, t, root, c, st))
PKB_NCCL_INTERPOSE(CommShrink,
                   (ncclComm_t c, int* ex, int nex, ncclComm_t* out, ncclConfig_t* cfg, int flags),
                   (c, ex, nex, out, cfg, flags))
PKB_NCCL_INTERPOSE(CommInitRankScalable,
                   (ncclComm_t* out, int nranks, int rank, int nid, ncclUniqueId* ids, ncclConfig_t* cfg),
                   (out, nranks, rank, nid, ids, cfg))
#endif
PKB_NCCL_INTERPOSE(GroupStart, (), ())
PKB_NCCL_INTERPOSE(GroupEnd, (), ())
PKB_NCCL_INTERPOSE(GetUniqueId, (ncclUniqueId* id), (id))
PKB_NCCL_INTERPOSE(CommInitRank, (ncclComm_t* c, int nranks, ncclUniqueId id, int rank), (c, nranks, id, rank))
PKB_NCCL_INTERPOSE(CommInitRankConfig,
                   (ncclComm_t* c, int nranks, ncclUniqueId id, int rank, ncclConfig_t* cfg),
                   (c, nranks, id, rank, cfg))
PKB_NCCL_INTERPOSE(CommInitAll, (ncclComm_t* c, int ndev, const int* devs), (c, ndev, devs))
PKB_NCCL_INTERPOSE(CommSplit, (ncclComm_t c, int color, int key, ncclComm_t* out, ncclConfig_t* cfg),
                   (c, color, key, out, cfg))
#endif
