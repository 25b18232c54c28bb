#include "driver/results_guard.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>


#include "common/files.h"

namespace pkb {

namespace {

// Ctrl-C or a polite kill is not a candidate's doing: the in-flight marker
// goes, so that --resume runs that evaluation again.
std::string g_inflight;
void on_interrupt(int sig) {
  if (!g_inflight.empty()) unlink(g_inflight.c_str());
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

ResultsGuard::ResultsGuard(const std::string& path, JsonlWriter*) : path_(path) {
  content_ = read_if_present(path).value_or("");
  remember();
  g_inflight = inflight_path(path);
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  signal(SIGHUP, on_interrupt);
}

void ResultsGuard::remember() {
  struct stat st {};
  if (stat(path_.c_str(), &st) != 0) return;
  ino_ = st.st_ino;
  size_ = st.st_size;
  ctime_s_ = st.st_ctim.tv_sec;
  ctime_ns_ = st.st_ctim.tv_nsec;
}

void ResultsGuard::appended(const Json& record) {
  content_ += record.dump() + "\n";
  remember();
}

bool ResultsGuard::check_and_repair(std::unique_ptr<JsonlWriter>& writer) {
  struct stat st {};
  bool same = stat(path_.c_str(), &st) == 0 && st.st_ino == ino_ && st.st_size == size_ &&
              st.st_ctim.tv_sec == ctime_s_ && st.st_ctim.tv_nsec == ctime_ns_;
  if (same) return true;
  writer.reset();
  // A restore that fails throws (and ends the run, naming the path): records
  // appended to a file pkb could not put back would be claimed as its own.
  write_file_atomic(path_, content_, true);
  writer = std::make_unique<JsonlWriter>(path_, true);
  remember();
  return false;
}

void ResultsGuard::begin(const Json& base_record) {
  write_file_atomic(inflight_path(path_), base_record.dump() + "\n", true);
}

void ResultsGuard::end() { unlink(inflight_path(path_).c_str()); }

}  // namespace pkb
