#include "driver/candidate_build.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include "common/files.h"
#include "driver/candidate_pch.h"
#include "driver/response_extract.h"
#include "pkb/check.h"

namespace pkb {

namespace {

// FNV-1a, 64 bit: a stable content key, not a security boundary.
std::string content_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  std::ostringstream os;
  os << std::hex << std::setw(16) << std::setfill('0') << h;
  return os.str();
}

std::string ends_with_ext(const std::string& p) {
  size_t d = p.rfind('.');
  return d == std::string::npos ? "" : p.substr(d);
}

// `path` is `dir` or below it.
bool is_under(const std::string& path, const std::string& dir) {
  return !dir.empty() && path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

// `s` with every occurrence of the path `dir` (as a whole path prefix) written as `name`.
std::string replace_path(std::string s, const std::string& dir, const std::string& name) {
  if (dir.empty()) return s;
  for (size_t at = s.find(dir); at != std::string::npos; at = s.find(dir, at)) {
    const size_t end = at + dir.size();
    if (end == s.size() || s[end] == '/' || s[end] == '\'' || s[end] == ' ') {
      s.replace(at, dir.size(), name);
      at += name.size();
    } else {
      at = end;
    }
  }
  return s;
}

// Regular files below `dir`, as paths relative to it (symbolic links followed
// as the compiler would follow them), in no particular order.
void list_files(const std::string& dir, const std::string& rel, std::vector<std::string>& out, int depth = 0) {
  PKB_CHECK(depth < 32, "include folder '", dir, "' nests too deep");
  DIR* d = opendir((dir + rel).c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string r = rel + "/" + name;
    struct stat st;
    if (stat((dir + r).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) list_files(dir, r, out, depth + 1);
    else if (S_ISREG(st.st_mode)) out.push_back(r);
  }
  closedir(d);
}

// Names and bytes of every file under `dir` (NOTE [candidate cache key]).
std::string tree_content(const std::string& dir) {
  std::vector<std::string> files;
  list_files(dir, "", files);
  std::sort(files.begin(), files.end());
  std::string all;
  for (const auto& f : files) {
    const std::string text = read_file(dir + f);
    all += f + '\0' + std::to_string(text.size()) + '\0' + text;
  }
  return all;
}

std::string trim_log(const std::string& log, size_t max = 8000) {
  return log.size() <= max ? log : log.substr(0, max) + "\n... (" + std::to_string(log.size() - max) + " more bytes)";
}

}  // namespace

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string run_command(const std::string& cmd, int* status, double timeout_s) {
  std::string full = timeout_s > 0 ? "timeout -k 5 " + std::to_string(static_cast<int>(timeout_s)) + " " + cmd : cmd;
  FILE* p = popen((full + " 2>&1").c_str(), "r");
  PKB_CHECK(p != nullptr, "cannot run: ", cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int st = pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

std::string cache_dir() {
  if (const char* d = std::getenv("PKB_CACHE_DIR")) return d;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache/pkb/candidates";
}

CandidateToolchain CandidateToolchain::load(const std::string& build_dir) {
  std::string path = build_dir + "/pkb_build.json";
  std::ifstream f(path);
  PKB_CHECK(f.good(), "missing '", path, "' (is this a pkb build directory?)");
  Json j = Json::parse(f);
  CandidateToolchain tc;
  tc.source_dir = j.value("source_dir", "");
  tc.cxx = j.at("cxx").get<std::string>();
  tc.nvcc = j.value("nvcc", "");
  tc.cuobjdump = j.value("cuobjdump", "");
  tc.cxx_flags = j.at("cxx_flags").get<std::vector<std::string>>();
  tc.cuda_flags = j.value("cuda_flags", std::vector<std::string>{});
  tc.include_dirs = j.at("include_dirs").get<std::vector<std::string>>();
  tc.link_flags = j.at("link_flags").get<std::vector<std::string>>();
  return tc;
}

namespace {

// The compiler's flags (include folders last) and link flags, as one shell line each.
std::pair<std::string, std::string> command_flags(bool use_nvcc, const CandidateToolchain& tc) {
  std::ostringstream flags;
  for (const auto& f : use_nvcc ? tc.cuda_flags : tc.cxx_flags) flags << " " << shell_quote(f);
  for (const auto& d : tc.include_dirs) flags << " -I" << shell_quote(d);
  std::ostringstream link;
  for (const auto& f : tc.link_flags) {
    if (use_nvcc && f.rfind("-Wl,", 0) == 0) {
      // nvcc has no -Wl: pass each comma-separated piece with -Xlinker.
      std::stringstream parts(f.substr(4));
      std::string part;
      while (std::getline(parts, part, ',')) link << " -Xlinker " << shell_quote(part);
    } else {
      link << " " << shell_quote(f);
    }
  }
  return {flags.str(), link.str()};
}

}  // namespace

namespace {

std::mutex& build_lock(const std::string& key) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<std::mutex>> locks;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<std::mutex>& m = locks[key];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

}  // namespace

namespace {

// A folder without its trailing slashes (the checkout's, as recorded).
std::string without_trailing_slash(std::string d) {
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d;
}
std::string checkout_dir(const CandidateToolchain& tc) { return without_trailing_slash(tc.source_dir); }

// NOTE [candidate cache key]: `in_checkout` adds every file of the include
// folders inside the checkout (the precompiled header's key).
std::string key_of(const std::string& tag, const std::string& source_text, bool use_nvcc, const CandidateToolchain& tc,
                   const std::string& compiler_version, bool in_checkout) {
  const auto [flags, link] = command_flags(use_nvcc, tc);
  const std::string src_dir = checkout_dir(tc);
  std::string headers;
  for (const auto& d : tc.include_dirs) {
    if (is_under(d, src_dir)) {
      if (in_checkout) headers += "tree " + replace_path(d, src_dir, "<source>") + '\0' + tree_content(d) + '\0';
    } else {
      const std::string version = d + "/torch/version.h";
      struct stat st;
      if (stat(version.c_str(), &st) == 0 && S_ISREG(st.st_mode))
        headers += "version " + d + '\0' + read_file(version) + '\0';
    }
  }
  const std::string compiler = use_nvcc ? tc.nvcc : tc.cxx;
  return content_hash(tag + "\n" + source_text + "\n" + compiler + "\n" + replace_path(flags, src_dir, "<source>") +
                      "\n" + replace_path(link, src_dir, "<source>") + "\n" + compiler_version + "\n" + headers);
}

}  // namespace

std::string candidate_cache_key(const std::string& source_text, bool use_nvcc, const CandidateToolchain& tc,
                                const std::string& compiler_version) {
  return key_of("pkb candidate key 3", source_text, use_nvcc, tc, compiler_version, false);
}

std::string precompiled_header_key(const CandidateToolchain& tc, const std::string& compiler_version) {
  return key_of("pkb candidate key 2", precompiled_header_source(), false, tc, compiler_version, true);
}

std::vector<std::string> read_depfile(const std::string& text) {
  // "target: a b \<newline> c", with "\ " and "\#" escaping and "$$" for "$".
  std::vector<std::string> deps;
  size_t at = 0;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] == ':' && (text[i + 1] == ' ' || text[i + 1] == '\n' || text[i + 1] == '\\')) {
      at = i + 1;
      break;
    }
  }
  if (at == 0) return deps;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) deps.push_back(cur);
    cur.clear();
  };
  for (size_t i = at; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      const char n = text[i + 1];
      if (n == '\n') {
        flush();
        ++i;
      } else if (n == ' ' || n == '#' || n == '\\') {
        cur += n;
        ++i;
      } else {
        cur += c;
      }
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      cur += '$';
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      flush();
    } else if (c == ':' && cur.empty()) {
      // A later rule (-MP's "header:" lines): its target is a prerequisite already listed.
    } else {
      cur += c;
    }
  }
  flush();
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  return deps;
}

std::string header_manifest(const std::vector<std::string>& deps, bool deps_known, const CandidateToolchain& tc) {
  const std::string src_dir = checkout_dir(tc);
  std::vector<std::string> rel;
  if (deps_known) {
    for (const auto& d : deps)
      if (is_under(d, src_dir) && d.size() > src_dir.size()) rel.push_back(d.substr(src_dir.size() + 1));
  } else {
    for (const auto& d : tc.include_dirs) {
      if (!is_under(d, src_dir)) continue;
      std::vector<std::string> files;
      list_files(d, "", files);
      for (const auto& f : files) rel.push_back(d.substr(std::min(d.size(), src_dir.size() + 1)) + f);
    }
  }
  std::sort(rel.begin(), rel.end());
  rel.erase(std::unique(rel.begin(), rel.end()), rel.end());
  std::string m;
  for (const auto& r : rel)
    if (auto text = read_if_present(src_dir + "/" + r))  // listed, then gone: nothing to compare against
      m += content_hash(*text) + '\t' + r + '\n';
  return m;
}

bool header_manifest_holds(const std::string& manifest, const std::string& source_dir) {
  const std::string src_dir = without_trailing_slash(source_dir);
  std::stringstream lines(manifest);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) return false;
    std::optional<std::string> text = read_if_present(src_dir + "/" + line.substr(tab + 1));
    if (!text || content_hash(*text) != line.substr(0, tab)) return false;
  }
  return true;
}

namespace {

struct CachedBuild {
  std::string so_path, log;
};

// NOTE [candidate cache key]: the first build under `dir` whose manifest
// still holds in the checkout `source_dir`.
std::optional<CachedBuild> cached_build(const std::string& dir, const std::string& source_dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return std::nullopt;
  std::vector<std::string> builds;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("h-", 0) == 0) builds.push_back(dir + "/" + name);
  }
  closedir(d);
  std::sort(builds.begin(), builds.end());
  for (const auto& b : builds) {
    struct stat sb;
    std::optional<std::string> manifest = read_if_present(b + "/headers");
    if (!manifest || stat((b + "/candidate.so").c_str(), &sb) != 0) continue;
    if (!header_manifest_holds(*manifest, source_dir)) continue;
    return CachedBuild{b + "/candidate.so", read_if_present(b + "/build.log").value_or("")};
  }
  return std::nullopt;
}

}  // namespace

BuildResult build_candidate(const std::string& source, const std::string& device, const CandidateToolchain& tc,
                            double timeout_s) {
  auto t0 = std::chrono::steady_clock::now();
  BuildResult res;
  std::string ext = ends_with_ext(source);
  std::string src = read_file(source);
  if (is_response_file(source)) {
    auto code = extract_candidate(src);
    if (!code) {
      res.log = "no code in the response (it has no complete fenced ```cuda or ```cpp block; the last such block "
                "is the candidate)";
      res.no_code = true;
      return res;
    }
    src = code->code;
    // A ```cpp block in a GPU run is CUDA code labelled loosely: nvcc compiles both.
    ext = code->language == "cuda" || code->language == "cu" || device == "cuda" ? ".cu" : ".cpp";
  }
  bool use_nvcc = ext == ".cu";
  if (use_nvcc && (device != "cuda" || tc.nvcc.empty())) {
    res.log = "a .cu candidate needs the GPU path (--device cuda and a pkb built with CUDA)";
    return res;
  }
  std::string compiler = use_nvcc ? tc.nvcc : tc.cxx;
  const auto [flags, link] = command_flags(use_nvcc, tc);

  int st = 0;
  std::string version = run_command(shell_quote(compiler) + " --version", &st);
  res.key = candidate_cache_key(src, use_nvcc, tc, version);
  // Candidates of the same content (samples of one model often are) share a
  // cache folder: their builds in this process take turns, or one's copy of
  // the source is truncated while the other's compiler reads it (an empty,
  // entry-less .so: load_error). The second then finds the cached object.
  std::lock_guard<std::mutex> same_content(build_lock(res.key));
  const std::string dir = cache_dir() + "/" + res.key;
  // NOTE [candidate cache key]: a build under the key whose headers still read the same.
  if (auto hit = cached_build(dir, tc.source_dir)) {
    res.ok = true;
    res.cached = true;
    res.so_path = hit->so_path;
    res.log = trim_log(hit->log);
    return res;
  }
  make_dirs(dir);
  // Compile from a copy in the cache so the diagnostics name a stable file.
  // Written aside and renamed, so that another process's compiler reading it
  // meanwhile never sees it truncated.
  std::string copy = dir + "/candidate" + ext;
  {
    const std::string tmp = copy + ".tmp." + std::to_string(getpid());
    {
      std::ofstream o(tmp, std::ios::binary);
      o << src;
    }
    rename(tmp.c_str(), copy.c_str());
  }
  // Built in a folder of this process's own, then renamed to its manifest's.
  const std::string work = dir + "/build." + std::to_string(getpid());
  run_command("rm -rf " + shell_quote(work), nullptr);
  make_dirs(work);
  const std::string tmp_so = work + "/candidate.so", depfile = work + "/deps.d";
  std::string pch;
  if (!use_nvcc) {
    // NOTE [candidate precompiled header]
    const std::string header =
        precompiled_header(compiler, version, flags, precompiled_header_key(tc, version), timeout_s, nullptr);
    if (!header.empty()) pch = " -include " + shell_quote(header);
  }
  // The compiler lists the headers it read, except those inside a
  // precompiled header (GCC's list then lacks them): a -M pass without it,
  // the header's own source in its place, lists those.
  const std::string deps_flags = " -MD -MF " + shell_quote(depfile);
  std::string cmd = shell_quote(compiler) + flags + pch + (pch.empty() ? deps_flags : "") + " -o " +
                    shell_quote(tmp_so) + " " + shell_quote(copy) + link;
  std::string out = run_command(cmd, &st, timeout_s);
  const std::string log = "$ " + cmd + "\n" + out;
  std::ofstream(dir + "/build.log") << log;  // the last build's, for failed ones (verdict.cpp)
  res.log = trim_log(out);
  if (st == 0 && !pch.empty()) {
    int mst = 0;
    run_command(shell_quote(compiler) + flags + " -include pkb/solution.h -M -MF " + shell_quote(depfile) + " " +
                    shell_quote(copy),
                &mst, timeout_s);
    if (mst != 0) unlink(depfile.c_str());
  }
  if (st == 0) {
    const std::string deps = read_if_present(depfile).value_or("");
    const std::string manifest = header_manifest(read_depfile(deps), !deps.empty(), tc);
    std::ofstream(work + "/headers") << manifest;
    std::ofstream(work + "/build.log") << log;
    unlink(depfile.c_str());
    const std::string final_dir = dir + "/h-" + content_hash(manifest);
    res.so_path = final_dir + "/candidate.so";
    struct stat sb;
    if (rename(work.c_str(), final_dir.c_str()) != 0) {
      // Another process made the same build meanwhile (either is it), or a
      // folder of this manifest lost its object: this build replaces it.
      if (stat(res.so_path.c_str(), &sb) != 0) {
        run_command("rm -rf " + shell_quote(final_dir), nullptr);
        rename(work.c_str(), final_dir.c_str());
      }
      run_command("rm -rf " + shell_quote(work), nullptr);
    }
    res.ok = stat(res.so_path.c_str(), &sb) == 0;
  } else {
    run_command("rm -rf " + shell_quote(work), nullptr);
    if (st == 124 || st == 137) res.log = "compiler timed out after " + std::to_string(timeout_s) + " s\n" + res.log;
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

ImportCheck check_import_list(const std::vector<std::string>& symbols, const std::vector<std::string>& needed) {
  ImportCheck c;
  auto flag = [&](const std::string& what, const std::string& item) {
    c.ok = false;
    c.offending.push_back(item);
    if (c.reason.empty()) c.reason = "imports " + what + " (" + item + ")";
  };
  for (const auto& s : symbols) {
    if (s.rfind("nccl", 0) == 0 || s.rfind("pnccl", 0) == 0) flag("NCCL", s);
    else if (s.find("c10d::") != std::string::npos) flag("c10d", s);
    else if (s.rfind("MPI_", 0) == 0 || s.rfind("PMPI_", 0) == 0) flag("MPI", s);
    else if (s.find("pkb::Collectives") != std::string::npos || s.find("pkb::Distributed") != std::string::npos)
      flag("the harness's collective facade", s);
    else if (s == "dlopen" || s == "dlsym" || s == "dlmopen" || s == "dlvsym")
      flag("the dynamic loader, which could reach NCCL or MPI at run time", s);
    else if (s.find("gloo::") != std::string::npos) flag("Gloo", s);
    // NOTE [forbidden routes]
    else if (s.find("c10::Dispatcher") != std::string::npos || s.find("c10::OperatorHandle") != std::string::npos ||
             s.find("c10::impl::OperatorEntry") != std::string::npos || s.find("torch::jit::") != std::string::npos)
      flag("the operator dispatcher, which reaches c10d's collectives (_c10d_functional, c10d ops) by name", s);
    else if (s == "dl_iterate_phdr" || s == "dladdr" || s == "dladdr1" || s == "dlinfo" || s == "_dl_find_object" ||
             s == "_r_debug" || s == "_dl_debug_state" || s == "getauxval" || s.rfind("__libc_dl", 0) == 0 ||
             s == "_dl_sym")
      flag("a walker of loaded objects, which could find NCCL's functions without importing them", s);
  }
  for (const auto& n : needed) {
    if (n.find("libnccl") != std::string::npos) flag("NCCL", n);
    else if (n.find("libmpi") != std::string::npos) flag("MPI", n);
  }
  if (!c.ok)
    c.reason = "candidate " + c.reason +
               "; cross-rank data must move through pkb::Context symmetric buffers";
  return c;
}

std::vector<std::string> imported_symbols(const std::string& so_path) {
  int st = 0;
  std::string syms = run_command("nm -D -C --undefined-only " + shell_quote(so_path), &st);
  PKB_CHECK(st == 0, "nm failed on '", so_path, "': ", syms);
  std::vector<std::string> symbols;
  std::stringstream ss(syms);
  std::string line;
  while (std::getline(ss, line)) {
    // "                 U ncclAllReduce" -> "ncclAllReduce"; strip "@VERSION".
    size_t u = line.find(" U ");
    if (u == std::string::npos) continue;
    std::string s = line.substr(u + 3);
    size_t at = s.find('@');
    if (at != std::string::npos) s = s.substr(0, at);
    symbols.push_back(s);
  }
  return symbols;
}

const std::vector<std::pair<std::string, std::string>>& forbidden_strings() {
  static const std::vector<std::pair<std::string, std::string>> k = {
      {"_c10d_functional", "a c10d functional collective, by its operator name"},
      {"c10d::", "a c10d operator or symbol, by name"},
      {"c10d_functional", "a c10d functional collective, by its operator name"},
      {"/proc/self/maps", "the map of loaded objects, to find NCCL's functions"},
      {"/proc/self/map_files", "the map of loaded objects, to find NCCL's functions"},
      {"/proc/self/mem", "its own memory through /proc"},
      {"libnccl", "NCCL's library, by name"},
      {"resolve_process_group", "the process group registry, by name"},
  };
  return k;
}

ImportCheck check_strings(const std::string& so_bytes) {
  ImportCheck c;
  for (const auto& [needle, what] : forbidden_strings()) {
    if (so_bytes.find(needle) == std::string::npos) continue;
    c.ok = false;
    c.offending.push_back("string \"" + needle + "\"");
    if (c.reason.empty())
      c.reason = "candidate names " + what + " (string \"" + needle +
                 "\"); cross-rank data must move through pkb::Context symmetric buffers";
  }
  return c;
}

ImportCheck check_imports(const std::string& so_path) {
  std::vector<std::string> symbols = imported_symbols(so_path);
  int st = 0;
  std::string line;
  std::string dyn = run_command("objdump -p " + shell_quote(so_path), &st);
  std::vector<std::string> needed;
  std::stringstream ds(dyn);
  while (std::getline(ds, line)) {
    size_t k = line.find("NEEDED");
    if (k != std::string::npos) {
      std::string lib = line.substr(k + 6);
      lib.erase(0, lib.find_first_not_of(" \t"));
      needed.push_back(lib);
    }
  }
  ImportCheck c = check_import_list(symbols, needed);
  if (!c.ok) return c;
  return check_strings(read_if_present(so_path).value_or(""));
}

}  // namespace pkb
