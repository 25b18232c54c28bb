#include "common/files.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "pkb/check.h"

namespace pkb {

bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

bool is_regular_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_empty_directory(const std::string& path) {
  DIR* d = opendir(path.c_str());
  if (!d) return false;
  bool empty = true;
  while (dirent* e = readdir(d)) empty = empty && (std::string(e->d_name) == "." || std::string(e->d_name) == "..");
  closedir(d);
  return empty;
}

void make_dirs(const std::string& path) {
  std::string cur = !path.empty() && path[0] == '/' ? "/" : "";
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    mkdir(cur.c_str(), 0755);
  }
}

std::optional<std::string> read_if_present(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f.good()) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string read_file(const std::string& path) {
  std::optional<std::string> text = read_if_present(path);
  PKB_CHECK(text.has_value(), "cannot read '", path, "'");
  return *text;
}

void write_file_atomic(const std::string& path, const std::string& text, bool overwrite) {
  PKB_CHECK(overwrite || !file_exists(path), "refusing to overwrite existing file '", path, "'");
  // Unique per write: two threads of one process may write at once.
  static std::atomic<uint64_t> serial{0};
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(serial++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    PKB_CHECK(f.good(), "cannot write '", tmp, "'");
    f << text;
    f.flush();
    PKB_CHECK(f.good(), "write to '", tmp, "' failed");
  }
  const int rc = overwrite ? rename(tmp.c_str(), path.c_str()) : link(tmp.c_str(), path.c_str());
  const int err = errno;
  if (rc != 0 || !overwrite) unlink(tmp.c_str());
  PKB_CHECK(rc == 0 || err != EEXIST, "refusing to overwrite existing file '", path, "'");
  PKB_CHECK(rc == 0, overwrite ? "rename to '" : "link to '", path, "': ", strerror(err));
}

}  // namespace pkb
