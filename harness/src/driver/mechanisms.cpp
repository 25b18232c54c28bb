#include "driver/mechanisms.h"

#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "pkb/check.h"

namespace pkb {

namespace {

const std::vector<std::string> kOrder = {"copy_engine", "sm_load_store", "tma", "nvls", "none", "unknown"};
constexpr size_t kMaxKernelsNamed = 3;
constexpr double kToolTimeoutS = 120;

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// "_ZN12_GLOBAL__N_116allreduce_kernelEPK5uint4..." -> "allreduce_kernel":
// evidence is for people; the parameter list only makes it long.
std::string kernel_name(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string name = status == 0 && d ? d : mangled;
  std::free(d);
  const std::string anon = "(anonymous namespace)::";
  for (size_t p; (p = name.find(anon)) != std::string::npos;) name.erase(p, anon.size());
  int depth = 0;  // cut at the parameter list, not at a '(' inside <...>
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    else if (name[i] == '>') --depth;
    else if (name[i] == '(' && depth == 0 && i > 0) return name.substr(0, i);
  }
  return name;
}

// Which instructions of one mechanism were seen, in which kernels, in order.
struct Sightings {
  std::vector<std::string> ops, kernels;
  void add(const std::string& op, const std::string& kernel) {
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    if (!kernel.empty() && std::find(kernels.begin(), kernels.end(), kernel) == kernels.end())
      kernels.push_back(kernel);
  }
  std::string evidence(const std::string& what) const {
    std::string e = what + " " + join(ops, ", ");
    if (kernels.empty()) return e;
    std::vector<std::string> named(kernels.begin(), kernels.begin() + std::min(kernels.size(), kMaxKernelsNamed));
    e += " in " + join(named, ", ");
    if (kernels.size() > kMaxKernelsNamed) e += " (+" + std::to_string(kernels.size() - kMaxKernelsNamed) + " more)";
    return e;
  }
};

Mechanisms from_sightings(const std::map<std::string, Sightings>& seen, const std::string& what) {
  Mechanisms out;
  for (const auto& name : kOrder) {
    auto it = seen.find(name);
    if (it != seen.end()) out.push_back({name, it->second.evidence(what)});
  }
  return out;
}

// The SASS opcode's mechanism, by its base (the part before the first '.').
const char* sass_mechanism(const std::string& base) {
  static const std::set<std::string> kLoadStore = {"LDG", "STG", "ATOMG", "REDG", "LD", "ST", "ATOM", "RED", "LDGSTS"};
  static const std::set<std::string> kTma = {"UBLKCP",  "UBLKRED",  "UBLKPF", "UTMALDG",
                                             "UTMASTG", "UTMAREDG", "UTMAPF"};
  if (kLoadStore.count(base)) return "sm_load_store";
  if (kTma.count(base)) return "tma";
  if (base == "LDGMC") return "nvls";
  return nullptr;
}

bool has_device_code(const std::string& so_path) {
  int st = 0;
  std::string sections = run_command("objdump -h " + shell_quote(so_path), &st, kToolTimeoutS);
  PKB_CHECK(st == 0, "objdump -h failed on '", so_path, "': ", sections);
  return sections.find(".nv_fatbin") != std::string::npos;
}

bool executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

}  // namespace

Mechanisms mechanisms_from_imports(const std::vector<std::string>& symbols) {
  std::vector<std::string> copies;
  for (const auto& s : symbols)
    if ((starts_with(s, "cudaMemcpy") || starts_with(s, "cuMemcpy")) &&
        std::find(copies.begin(), copies.end(), s) == copies.end())
      copies.push_back(s);
  if (copies.empty()) return {};
  return {{"copy_engine",
           "imports " + join(copies, ", ") + " (whether a copy reaches peer memory is not known statically)"}};
}

Mechanisms mechanisms_from_sass(const std::string& sass) {
  std::map<std::string, Sightings> seen;
  std::string kernel, line;
  std::stringstream ss(sass);
  while (std::getline(ss, line)) {
    size_t f = line.find("Function : ");
    if (f != std::string::npos) {
      std::string mangled = line.substr(f + 11);
      mangled.erase(mangled.find_last_not_of(" \t\r") + 1);
      kernel = kernel_name(mangled);
      continue;
    }
    // "        /*0090*/  @!P0 LDG.E.64 R2, desc[UR4][R2.64] ;  /* 0x... */"
    size_t a = line.find("/*");
    if (a == std::string::npos || line.find_first_not_of(" \t") != a) continue;
    size_t b = line.find("*/", a);
    if (b == std::string::npos) continue;
    std::stringstream ins(line.substr(b + 2));
    std::string op;
    ins >> op;
    if (!op.empty() && op[0] == '@') ins >> op;
    if (op.empty() || op.compare(0, 2, "/*") == 0) continue;
    std::string base = op.substr(0, op.find_first_of(".;"));
    if (const char* m = sass_mechanism(base)) seen[m].add(base, kernel);
  }
  return from_sightings(seen, "SASS");
}

Mechanisms mechanisms_from_ptx(const std::string& ptx) {
  std::map<std::string, Sightings> seen;
  std::string kernel, line;
  std::stringstream ss(ptx);
  while (std::getline(ss, line)) {
    std::stringstream ls(line);
    std::string tok;
    ls >> tok;
    if (tok == ".visible" || tok == ".weak" || tok == ".extern") ls >> tok;
    if (tok == ".entry" || tok == ".func") {
      // ".func  (.param .b32 func_retval0) _Z3fooi(" names the function after the return value.
      std::string rest;
      std::getline(ls, rest);
      rest.erase(0, rest.find_first_not_of(" \t"));
      if (!rest.empty() && rest[0] == '(') rest.erase(0, rest.find(')') + 1);
      rest.erase(0, rest.find_first_not_of(" \t"));
      kernel = kernel_name(rest.substr(0, rest.find_first_of("( \t")));
      continue;
    }
    if (!tok.empty() && tok[0] == '@') ls >> tok;  // predicate
    std::string op;
    if (starts_with(tok, "multimem.")) {
      op = tok.substr(0, tok.find('.', 9));  // multimem.ld_reduce, multimem.st, multimem.red
      seen["nvls"].add(op, kernel);
    } else if (starts_with(tok, "cp.async.bulk") || starts_with(tok, "cp.reduce.async.bulk")) {
      bool reduce = starts_with(tok, "cp.reduce");
      op = reduce ? "cp.reduce.async.bulk" : "cp.async.bulk";
      if (tok.find(".tensor") != std::string::npos) op += ".tensor";
      else if (tok.find(".prefetch") != std::string::npos) op += ".prefetch";
      // commit_group / wait_group only order the copies above; they move nothing.
      if (tok.find("_group") != std::string::npos && tok.find("bulk_group") == std::string::npos) continue;
      seen["tma"].add(op, kernel);
    }
  }
  return from_sightings(seen, "PTX");
}

Mechanisms merge_mechanisms(const std::vector<Mechanisms>& parts) {
  Mechanisms out;
  for (const auto& name : kOrder) {
    std::vector<std::string> evidence;
    for (const auto& part : parts)
      for (const auto& m : part)
        if (m.name == name && std::find(evidence.begin(), evidence.end(), m.evidence) == evidence.end())
          evidence.push_back(m.evidence);
    if (!evidence.empty()) out.push_back({name, join(evidence, "; ")});
  }
  return out;
}

bool has_mechanism(const Mechanisms& m, const std::string& name) {
  return std::any_of(m.begin(), m.end(), [&](const Mechanism& x) { return x.name == name; });
}

Mechanisms detect_mechanisms(const std::string& so_path, const std::string& cuobjdump) {
  std::vector<Mechanisms> parts{mechanisms_from_imports(imported_symbols(so_path))};
  bool device = has_device_code(so_path);
  if (device && !executable(cuobjdump)) {
    parts.push_back({{"unknown", "the .so has device code, but cuobjdump was not found (set PKB_CUOBJDUMP); "
                                 "its kernels' mechanisms were not read"}});
  } else if (device) {
    int st_sass = 0, st_ptx = 0;
    const std::string tool = shell_quote(cuobjdump), so = shell_quote(so_path);
    std::string sass = run_command(tool + " -sass " + so, &st_sass, kToolTimeoutS);
    std::string ptx = run_command(tool + " -ptx " + so, &st_ptx, kToolTimeoutS);
    if (st_sass != 0 || st_ptx != 0) {
      std::string out = st_sass != 0 ? sass : ptx;
      if (out.size() > 300) out = out.substr(0, 300) + "...";
      parts.push_back({{"unknown", "cuobjdump failed (exit " + std::to_string(st_sass ? st_sass : st_ptx) +
                                       "): " + out}});
    } else {
      parts.push_back(mechanisms_from_sass(sass));
      parts.push_back(mechanisms_from_ptx(ptx));
    }
  }
  Mechanisms m = merge_mechanisms(parts);
  if (m.empty())
    m.push_back({"none", device ? "device code without global, TMA or multimem memory instructions, and no cudaMemcpy*"
                                : "no device code and no cudaMemcpy* import (host code only)"});
  return m;
}

std::string find_cuobjdump(const CandidateToolchain& tc) {
  if (const char* e = std::getenv("PKB_CUOBJDUMP")) return executable(e) ? e : "";
  if (executable(tc.cuobjdump)) return tc.cuobjdump;
  if (!tc.nvcc.empty()) {
    std::string beside = tc.nvcc.substr(0, tc.nvcc.rfind('/') + 1) + "cuobjdump";
    if (executable(beside)) return beside;
  }
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ps(path);
    std::string dir;
    while (std::getline(ps, dir, ':'))
      if (!dir.empty() && executable(dir + "/cuobjdump")) return dir + "/cuobjdump";
  }
  return "";
}

Json mechanisms_json(const Mechanisms& m) {
  Json out = Json::array();
  for (const auto& x : m) out.push_back({{"name", x.name}, {"evidence", x.evidence}});
  return out;
}

std::string mechanisms_brief(const Json& record_mechanisms) {
  static const std::map<std::string, std::string> kShort = {
      {"copy_engine", "ce"}, {"sm_load_store", "ldst"}, {"tma", "tma"}, {"nvls", "nvls"}, {"none", "none"},
      {"unknown", "?"}};
  if (!record_mechanisms.is_array()) return "";
  std::vector<std::string> names;
  for (const auto& m : record_mechanisms) {
    std::string n = m.value("name", std::string());
    auto it = kShort.find(n);
    names.push_back(it == kShort.end() ? n : it->second);
  }
  return join(names, "+");
}

}  // namespace pkb
