#include "common/plugin_loader.h"

#include <dlfcn.h>

namespace pkb {

namespace {

void* open_plugin(const std::string& path) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    throw LoadError("cannot load '" + path + "': " + (e ? e : "unknown dlopen error"));
  }
  return h;
}

// Names an older entry symbol, if the plugin has one, for a clearer message.
std::string older_entry(void* h, const std::string& stem, int current) {
  for (int v = current - 1; v >= 0; --v) {
    std::string sym = stem + std::to_string(v);
    if (dlsym(h, sym.c_str())) return sym;
  }
  return "";
}

}  // namespace

LoadedProblem load_problem_plugin(const std::string& path) {
  void* h = open_plugin(path);
  using Entry = const ProblemEntry* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(h, PKB_PROBLEM_ENTRY_SYMBOL));
  if (!entry) {
    std::string old = older_entry(h, "pkb_problem_entry_v", kProblemAbiVersion);
    throw LoadError("'" + path + "' does not export " PKB_PROBLEM_ENTRY_SYMBOL +
                    (old.empty() ? std::string(" (not a pkb problem plugin?)")
                                 : " (it exports " + old + ": rebuild it against this pkb)"));
  }
  const ProblemEntry* e = entry();
  if (!e || e->abi_version != kProblemAbiVersion)
    throw LoadError("'" + path + "' has problem ABI version " + std::to_string(e ? e->abi_version : -1) +
                    ", this pkb expects " + std::to_string(kProblemAbiVersion));
  LoadedProblem out;
  out.path = path;
  out.problem.reset(e->create());
  out.memory_estimate = reinterpret_cast<MemoryEstimateFn>(dlsym(h, PKB_MEMORY_ESTIMATE_SYMBOL));
  return out;
}

LoadedSolution load_solution_plugin(const std::string& path) {
  void* h = open_plugin(path);
  using Entry = const SolutionEntry* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(h, PKB_SOLUTION_ENTRY_SYMBOL));
  if (!entry) {
    std::string old = older_entry(h, "pkb_solution_entry_v", kSolutionAbiVersion);
    throw LoadError("'" + path + "' does not export " PKB_SOLUTION_ENTRY_SYMBOL +
                    (old.empty() ? std::string(" (did the candidate forget PKB_SOLUTION(solve)?)")
                                 : " (it exports " + old + ", an older ABI)"));
  }
  const SolutionEntry* e = entry();
  if (!e || e->abi_version != kSolutionAbiVersion)
    throw LoadError("'" + path + "' has solution ABI version " + std::to_string(e ? e->abi_version : -1) +
                    ", this pkb expects " + std::to_string(kSolutionAbiVersion));
  if (!e->solve) throw LoadError("'" + path + "' exports a null solve function");
  LoadedSolution out;
  out.path = path;
  out.solve = e->solve;
  out.torch_version = e->torch_version ? e->torch_version : "";
  if (out.torch_version != TORCH_VERSION)
    throw LoadError("'" + path + "' was built against libtorch " + out.torch_version + ", this pkb uses " +
                    TORCH_VERSION);
  return out;
}

}  // namespace pkb
