// `pkb try PROBLEM FILE`: build and evaluate one candidate through `pkb run`'s
// pipeline (driver/run_pipeline.h) and print its verdict (driver/verdict.h),
// as text for a model to read or, with --json, as one JSON object.
#include <sys/stat.h>

#include <cstdio>

#include "common/build_info.h"
#include "common/outcome.h"
#include "driver/commands.h"
#include "driver/mechanisms.h"
#include "driver/run_pipeline.h"
#include "driver/verdict.h"
#include "pkb/check.h"

namespace pkb {

int cmd_try(const TryOptions& o) {
  // Phase: resolve the problem, the file and the settings.
  const std::string bdir = build_dir();
  ProblemCatalog catalog = ProblemCatalog::discover(bdir);
  std::vector<int> ids = catalog.select(o.problem);
  PKB_CHECK(ids.size() == 1, "pkb try takes one problem, '", o.problem, "' selects ", ids.size());
  struct stat st;
  PKB_CHECK(stat(o.file.c_str(), &st) == 0 && S_ISREG(st.st_mode), "no candidate file '", o.file, "'");
  const size_t dot = o.file.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : o.file.substr(dot);
  PKB_CHECK(ext == ".cu" || ext == ".cpp" || ext == ".md" || ext == ".txt", "candidate '", o.file,
            "' must be .cu or .cpp source, or a raw model response (.md, .txt)");
  RunOptions ro = o.run;
  ro.solutions = o.file;
  if (ro.name.empty()) ro.name = "try";
  RunSettings s = resolve_settings(ro, source_dir());
  const PlanItem item = plan_item(catalog.by_id(ids.front()), o.file, 0, s.device, s.world);
  PKB_CHECK(item.skip_reason.empty(), item.problem->folder_name(), ": ", item.skip_reason);
  std::unique_ptr<JsonlWriter> writer;
  if (!ro.out.empty()) writer = std::make_unique<JsonlWriter>(ro.out, /*append=*/false);
  mkdir(s.work_dir.c_str(), 0755);

  // Phase: build and evaluate, as pkb run does.
  Progress progress(1);
  auto builds = build_all(s, {item}, progress);
  s.cuobjdump = find_cuobjdump(CandidateToolchain::load(bdir));
  Json r = evaluate_or_harness_error(s, item, &builds.at(item.source), 0);
  if (writer) writer->append(r);

  // Phase: the verdict.
  const Json v = make_verdict(r);
  if (o.json) std::printf("%s\n", v.dump(2).c_str());
  else std::printf("%s", verdict_text(v).c_str());
  if (writer) progress.note("record: " + writer->path());
  const std::string outcome = r.value("outcome", std::string());
  if (outcome == "harness_error") return kExitHarnessError;
  return outcome == "correct" ? kExitAllCorrect : kExitSomeNotCorrect;
}

}  // namespace pkb
