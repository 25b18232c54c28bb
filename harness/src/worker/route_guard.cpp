#include "worker/route_guard.h"

#include "worker/nccl_guard.h"

#ifdef PKB_HAVE_CUDA
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#endif

namespace pkb {

namespace {
std::string g_name;
int g_hidden = 0;  // nesting depth of Hidden minus Exposed
#ifdef PKB_HAVE_CUDA
c10::intrusive_ptr<c10d::ProcessGroup> g_group;

void unregister() {
  if (g_name.empty()) return;
  try {
    g_group = c10d::resolve_process_group(g_name);
  } catch (const std::exception&) {
    return;  // not registered (CPU mode, or already hidden)
  }
  c10d::unregister_process_group(g_name);
}

void reregister() {
  if (g_name.empty() || !g_group) return;
  try {
    c10d::register_process_group(g_name, g_group);
  } catch (const std::exception&) {
  }
  g_group.reset();
}
#else
void unregister() {}
void reregister() {}
#endif

// Hiding the group and opening the NCCL window go together (NOTE [NCCL calls
// counted], worker/nccl_guard.h): the window is open exactly while the group
// is hidden.
void hide() {
  unregister();
  nccl_guard::set_window(true);
}
void show() {
  nccl_guard::set_window(false);
  reregister();
}
}  // namespace

void CandidateRoutes::set_group(const std::string& name) { g_name = name; }

CandidateRoutes::Hidden::Hidden() {
  if (g_hidden++ == 0) hide();
}
CandidateRoutes::Hidden::~Hidden() {
  if (--g_hidden == 0) show();
}
CandidateRoutes::Exposed::Exposed() {
  if (g_hidden > 0) show();
}
CandidateRoutes::Exposed::~Exposed() {
  if (g_hidden > 0) hide();
}

}  // namespace pkb
