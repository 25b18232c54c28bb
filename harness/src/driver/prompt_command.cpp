// `pkb prompt ID`: the task a model is given, assembled from the files the
// harness itself uses, so the prompt cannot drift from what is evaluated:
// the problem README, the C++ reference, the machine, the candidate ABI
// headers and one worked example (a shipped symmetric-memory solution).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "common/build_info.h"
#include "common/files.h"
#include "common/outcome.h"
#include "common/topology_io.h"
#include "driver/commands.h"
#include "driver/problem_catalog.h"
#include "driver/prompt.h"

namespace pkb {

namespace {

std::string fenced(const std::string& lang, const std::string& body) {
  return "```" + lang + "\n" + body + (body.empty() || body.back() == '\n' ? "" : "\n") + "```\n";
}

// The shared building blocks (problems/blocks/) a reference is written with:
// every `#include "../blocks/NAME"` of `text`, and of those blocks in turn,
// each once, in the order first included. Without them a model reads a
// composition of names, not the math (41 problems use blocks).
void add_blocks(const std::string& blocks_dir, const std::string& text, std::vector<std::string>* names,
                std::vector<std::string>* texts) {
  static const std::string kPrefix = "#include \"../blocks/";
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(kPrefix, 0) != 0) continue;
    const size_t end = line.find('"', kPrefix.size());
    if (end == std::string::npos) continue;
    const std::string name = line.substr(kPrefix.size(), end - kPrefix.size());
    if (std::find(names->begin(), names->end(), name) != names->end()) continue;
    names->push_back(name);
    texts->push_back(read_file(blocks_dir + "/" + name));
    add_blocks(blocks_dir, texts->back(), names, texts);
  }
}

}  // namespace

std::string prompt_text(const ProblemInfo& p, const Topology& t) {
  const std::string src = source_dir();
  const std::string reference = read_file(p.source_dir + "/problem.cpp");
  std::vector<std::string> block_names, block_texts;
  add_blocks(p.source_dir + "/../blocks", reference, &block_names, &block_texts);
  std::ostringstream out;
  out << "# Task: " << p.folder_name() << " - " << p.spec.title << "\n\n"
      << "Write one CUDA source file that computes exactly what the reference below computes, on every rank, "
         "as fast as you can on the machine described below. pkb compiles it with nvcc (sm_90a, -O3, C++17, "
         "libtorch headers), runs one process per GPU, checks every output of every rank against the reference "
         "(same count, shapes and dtypes; values within atol "
      << p.spec.tolerance.atol << " + rtol " << p.spec.tolerance.rtol
      << " x |reference|), then times it against the reference.\n\n"
         "Rules: local compute may use ATen and cuBLAS; data moves between GPUs only through "
         "`ctx.symmetric()` buffers (peer pointers, signal pads, barriers). A file that calls NCCL, c10d or MPI, "
         "or loads libraries at run time, is rejected. Do not modify the inputs: they are reused across calls.\n\n"
      << "## The problem\n\n"
      << read_file(p.source_dir + "/README.md") << "\n"
      << "## The reference (C++; `comm` is the harness's torch.distributed-like facade over NCCL)\n\n"
      << fenced("cpp", reference) << "\n";
  if (!block_names.empty()) out << "The shared building blocks it includes (`problems/blocks/`):\n\n";
  for (size_t i = 0; i < block_names.size(); ++i)
    out << "`problems/blocks/" << block_names[i] << "`:\n\n" << fenced("cpp", block_texts[i]) << "\n";
  out << "## The machine\n\n"
      << t.gpus << "x " << t.gpu << "; NVLink " << t.nvlink_bw_per_dir / 1e9 << " GB/s per GPU per direction; HBM "
      << t.hbm_bw / 1e12 << " TB/s per GPU; dense bf16 " << t.peak_bf16_flops / 1e12 << " TFLOP/s per GPU; "
      << "NVLink multicast (multimem) " << (t.multicast ? "available" : "NOT available: do not use it") << ".\n\n"
      << "## The candidate ABI\n\n"
      << "Define `std::vector<at::Tensor> solve(pkb::Context&, const pkb::Inputs&)` and export it with "
         "`PKB_SOLUTION(solve)`. Headers you may include:\n\n"
      << fenced("cpp", read_file(src + "/harness/include/pkb/solution.h")) << "\n"
      << fenced("cpp", read_file(src + "/harness/include/pkb/context.h")) << "\n"
      << fenced("cpp", read_file(src + "/harness/include/pkb/inputs.h")) << "\n"
      << fenced("cuda", read_file(src + "/harness/include/pkb/device.cuh")) << "\n"
      << "## A worked example (problem 01_allreduce)\n\n"
      << fenced("cuda", read_file(src + "/solutions/01_allreduce.cu")) << "\n"
      << "## Your answer\n\n"
      << "Reply with the whole file in one fenced ```cuda block; if you write several, the last one is used.\n";
  return out.str();
}

int cmd_prompt(const PromptOptions& o) {
  ProblemCatalog catalog = ProblemCatalog::discover(build_dir());
  std::vector<int> ids = catalog.select(o.problem);
  PKB_CHECK(ids.size() == 1, "pkb prompt takes one problem, '", o.problem, "' selects ", ids.size());
  std::printf("%s", prompt_text(catalog.by_id(ids.front()), load_topology(o.topology, source_dir())).c_str());
  return kExitAllCorrect;
}

}  // namespace pkb
