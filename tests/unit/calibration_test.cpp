// pkb calibrate's file format, the choice of calibrated file, and the second
// roofline in records (NOTE [calibrated roofline]); no GPU needed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/calibration.h"
#include "pkb/check.h"

namespace pkb {
namespace {

std::string temp_dir(const std::string& name) {
  std::string d = testing::TempDir() + "/pkb_cal_" + std::to_string(getpid()) + "_" + name;
  mkdir(d.c_str(), 0755);
  mkdir((d + "/topology").c_str(), 0755);
  return d;
}

void write(const std::string& path, const Json& j) {
  std::ofstream f(path);
  f << j.dump(2);
}

Json datasheet_h200() {
  return {{"name", "h200_sxm_2"}, {"gpu", "NVIDIA H200"}, {"gpus", 2},          {"p2p", true},
          {"multicast", false},   {"nvlink_bw_per_dir", 478.8e9}, {"hbm_bw", 4.8e12}, {"peak_bf16_flops", 989e12}};
}

Json rank_result(int rank, double hbm_rate, double gemm_rate) {
  Json r;
  r["rank"] = rank;
  r["gpu"] = {{"name", "NVIDIA H200"}, {"sm_count", 132}};
  r["launch"] = {{"gpu_back_to_back_us", 1.5 + rank}, {"event_pair_us", 4.0}, {"host_enqueue_us", 2.0},
                 {"host_roundtrip_us", 9.0}};
  r["hbm"] = {{"tests", Json::array({{{"method", "sm_copy"}, {"blocks", 132}, {"rate", hbm_rate * 0.9}},
                                     {{"method", "sm_copy"}, {"blocks", 264}, {"rate", hbm_rate}},
                                     {{"method", "sm_copy"}, {"blocks", 528}, {"error", "boom"}, {"rate", 1e15}},
                                     {{"method", "copy_engine"}, {"rate", hbm_rate * 0.8}}})}};
  r["gemm"] = {{"rate", gemm_rate}, {"median_us", 1500.0}};
  return r;
}

Json nvlink_test(const char* mech, const char* mode, int shift, bool active, double rate, int blocks = 0) {
  Json t = {{"mechanism", mech}, {"mode", mode}, {"shift", shift}, {"active", active}};
  if (active) t["rate"] = rate;
  if (blocks) t["blocks"] = blocks;
  return t;
}

CalibrationInput one_gpu_input() {
  CalibrationInput in;
  in.name = "nvidia_h200_1.calibrated";
  in.gpu = "NVIDIA H200";
  in.gpus = 1;
  in.datasheet = datasheet_for("NVIDIA H200", 1, PKB_SOURCE_DIR);
  in.ranks = {rank_result(0, 4.2e12, 700e12)};
  in.provenance = {{"date", "2026-12-01T00:00:00Z"}, {"git_sha", "abc"}};
  return in;
}

TEST(Calibration, Names) {
  EXPECT_TRUE(is_calibrated_name("h200_sxm_2.calibrated"));
  EXPECT_FALSE(is_calibrated_name("h200_sxm_2"));
  EXPECT_FALSE(is_calibrated_name(".calibrated"));
  DatasheetChoice exact = datasheet_for("NVIDIA H200", 2, PKB_SOURCE_DIR);
  ASSERT_TRUE(exact.found);
  EXPECT_TRUE(exact.exact);
  EXPECT_EQ(exact.name, "h200_sxm_2");
  EXPECT_EQ(calibrated_name("NVIDIA H200", 2, exact), "h200_sxm_2.calibrated");
  DatasheetChoice one = datasheet_for("NVIDIA H200", 1, PKB_SOURCE_DIR);
  ASSERT_TRUE(one.found);
  EXPECT_TRUE(one.exact);
  EXPECT_EQ(one.name, "h200_sxm_1");
  // No shipped file for 4 H200s: the first datasheet of the same GPU (sorted).
  DatasheetChoice same_gpu = datasheet_for("NVIDIA H200", 4, PKB_SOURCE_DIR);
  ASSERT_TRUE(same_gpu.found);
  EXPECT_FALSE(same_gpu.exact);
  EXPECT_EQ(same_gpu.name, "h200_sxm_1");
  EXPECT_EQ(calibrated_name("NVIDIA H200", 4, same_gpu), "nvidia_h200_4.calibrated");
  EXPECT_EQ(calibrated_name("NVIDIA H100 80GB HBM3", 4, datasheet_for("NVIDIA H100 80GB HBM3", 4, PKB_SOURCE_DIR)),
            "nvidia_h100_80gb_hbm3_4.calibrated");
  EXPECT_FALSE(datasheet_for("NVIDIA B200", 8, PKB_SOURCE_DIR).found);
  EXPECT_FALSE(datasheet_for("", 8, PKB_SOURCE_DIR).found);
}

TEST(Calibration, OneGpuFileMeasuresWhatNeedsNoPeer) {
  Json t = make_calibrated_topology(one_gpu_input());
  EXPECT_TRUE(t["calibrated"].get<bool>());
  EXPECT_EQ(t["format_version"], kCalibrationFormatVersion);
  EXPECT_EQ(t["datasheet"], "h200_sxm_1");
  EXPECT_FALSE(t.contains("datasheet_note"));  // the shipped one-GPU datasheet: exact
  EXPECT_EQ(t["provenance"]["git_sha"], "abc");
  ASSERT_EQ(t["raw"].size(), 1u);
  // HBM: the best sm_copy grid that did not fail; GEMM as measured.
  EXPECT_DOUBLE_EQ(t["hbm_bw"].get<double>(), 4.2e12);
  EXPECT_EQ(t["rates"]["hbm_bw"]["source"], "measured");
  EXPECT_NEAR(t["rates"]["hbm_bw"]["of_datasheet"].get<double>(), 4.2 / 4.8, 1e-12);
  EXPECT_DOUBLE_EQ(t["rates"]["hbm_bw"]["copy_engine_per_gpu"][0].get<double>(), 4.2e12 * 0.8);
  EXPECT_DOUBLE_EQ(t["peak_bf16_flops"].get<double>(), 700e12);
  // NVLink: the datasheet's, saying why, for the roofline and every mechanism.
  EXPECT_DOUBLE_EQ(t["nvlink_bw_per_dir"].get<double>(), 478.8e9);
  for (const char* k : {"nvlink_bw_per_dir", "nvlink_sm_load_bw_per_dir", "nvlink_sm_store_bw_per_dir",
                        "nvlink_copy_engine_bw_per_dir"}) {
    EXPECT_EQ(t["rates"][k]["source"], "datasheet") << k;
    EXPECT_NE(t["rates"][k]["reason"].get<std::string>().find("one GPU"), std::string::npos) << k;
    EXPECT_FALSE(t["rates"][k].contains("of_datasheet")) << k;
  }
  // Latencies: launch measured, barrier absent with the reason.
  EXPECT_DOUBLE_EQ(t["latencies"]["kernel_launch"]["gpu_back_to_back_us"].get<double>(), 1.5);
  EXPECT_EQ(t["latencies"]["barrier"]["device"]["source"], "absent");
  EXPECT_TRUE(t["latencies"]["barrier"]["device"]["value_us"].is_null());
  EXPECT_TRUE(t["latencies"]["barrier"]["stream"].contains("reason"));
  // Still an ordinary topology file.
  Topology topo = topology_from_json(t);
  EXPECT_EQ(topo.name, "nvidia_h200_1.calibrated");
  EXPECT_EQ(topo.gpus, 1);
  EXPECT_DOUBLE_EQ(topo.hbm_bw, 4.2e12);
  EXPECT_DOUBLE_EQ(topo.nvlink_bw_per_dir, 478.8e9);
  EXPECT_FALSE(topo.multicast);
}

TEST(Calibration, NoDatasheetLeavesUnmeasuredRatesOut) {
  CalibrationInput in = one_gpu_input();
  in.gpu = "NVIDIA B200";
  in.datasheet = datasheet_for(in.gpu, 1, PKB_SOURCE_DIR);
  in.ranks[0]["gemm"] = {{"error", "cuBLAS failed"}};
  Json t = make_calibrated_topology(in);
  EXPECT_TRUE(t["datasheet"].is_null());
  EXPECT_DOUBLE_EQ(t["nvlink_bw_per_dir"].get<double>(), 0.0);  // no roofline term rather than a wrong one
  EXPECT_EQ(t["rates"]["nvlink_bw_per_dir"]["source"], "absent");
  EXPECT_DOUBLE_EQ(t["peak_bf16_flops"].get<double>(), 0.0);
  EXPECT_NE(t["rates"]["peak_bf16_flops"]["reason"].get<std::string>().find("cuBLAS failed"), std::string::npos);
  EXPECT_DOUBLE_EQ(t["hbm_bw"].get<double>(), 4.2e12);
}

TEST(Calibration, TwoGpusMedianAndBestMechanism) {
  CalibrationInput in;
  in.name = "h200_sxm_2.calibrated";
  in.gpu = "NVIDIA H200";
  in.gpus = 2;
  in.p2p = true;
  in.datasheet = datasheet_for("NVIDIA H200", 2, PKB_SOURCE_DIR);
  for (int r = 0; r < 2; ++r) {
    Json j = rank_result(r, r ? 4.4e12 : 4.0e12, r ? 720e12 : 680e12);
    double k = r ? 1.02 : 0.98;  // rank 1 a little faster
    j["nvlink"]["tests"] = Json::array({
        nvlink_test("sm_load", "both", 1, true, 300e9 * k, 132), nvlink_test("sm_load", "both", 1, true, 330e9 * k, 264),
        nvlink_test("sm_store", "both", 1, true, 310e9 * k, 132),
        nvlink_test("ce_pull", "both", 1, true, 370e9 * k), nvlink_test("ce_push", "both", 1, true, 360e9 * k),
        nvlink_test("sm_load", "one", 1, r == 0, 400e9), nvlink_test("ce_pull", "one", 1, r == 0, 420e9)});
    j["barrier"] = {{"device", {{"median_us", r ? 2.2 : 1.8}}}, {"stream", {{"median_us", 6.0}}}};
    in.ranks.push_back(j);
  }
  Json t = make_calibrated_topology(in);
  EXPECT_DOUBLE_EQ(t["hbm_bw"].get<double>(), 4.2e12);  // median over GPUs
  EXPECT_DOUBLE_EQ(t["peak_bf16_flops"].get<double>(), 700e12);
  const Json& rates = t["rates"];
  EXPECT_NEAR(rates["nvlink_sm_load_bw_per_dir"]["value"].get<double>(), 330e9, 1);
  EXPECT_NEAR(rates["nvlink_sm_store_bw_per_dir"]["value"].get<double>(), 310e9, 1);
  EXPECT_NEAR(rates["nvlink_copy_engine_bw_per_dir"]["value"].get<double>(), 370e9, 1);
  EXPECT_NEAR(rates["nvlink_sm_load_bw_per_dir"]["one_direction"].get<double>(), 400e9, 1);
  EXPECT_NEAR(rates["nvlink_copy_engine_bw_per_dir"]["per_gpu"][1].get<double>(), 370e9 * 1.02, 1);
  EXPECT_EQ(rates["nvlink_bw_per_dir"]["source"], "measured");
  EXPECT_EQ(rates["nvlink_bw_per_dir"]["mechanism"], "copy_engine");
  EXPECT_NEAR(t["nvlink_bw_per_dir"].get<double>(), 370e9, 1);
  EXPECT_NEAR(rates["nvlink_bw_per_dir"]["of_datasheet"].get<double>(), 370e9 / 478.8e9, 1e-6);
  EXPECT_EQ(t["latencies"]["barrier"]["device"]["source"], "measured");
  EXPECT_NEAR(t["latencies"]["barrier"]["device"]["value_us"].get<double>(), 2.0, 1e-12);
  EXPECT_FALSE(t.contains("datasheet_note"));

  // The peer steps skipped on every rank: the datasheet's NVLink, with the reason.
  for (auto& r : in.ranks) {
    r["nvlink"] = {{"skipped", "GPU 0 cannot access GPU 1"}};
    r["barrier"] = {{"skipped", "GPU 0 cannot access GPU 1"}};
  }
  t = make_calibrated_topology(in);
  EXPECT_EQ(t["rates"]["nvlink_bw_per_dir"]["source"], "datasheet");
  EXPECT_NE(t["rates"]["nvlink_bw_per_dir"]["reason"].get<std::string>().find("cannot access"), std::string::npos);
  EXPECT_DOUBLE_EQ(t["nvlink_bw_per_dir"].get<double>(), 478.8e9);
  EXPECT_EQ(t["latencies"]["barrier"]["stream"]["source"], "absent");
}

TEST(Calibration, ChoosingTheCalibratedFile) {
  std::string src = temp_dir("choose");
  write(src + "/topology/h200_sxm_2.json", datasheet_h200());
  Json one = make_calibrated_topology(one_gpu_input());
  write(src + "/topology/nvidia_h200_1.calibrated.json", one);
  Json two = one;
  two["name"] = "h200_sxm_2.calibrated";
  two["gpus"] = 2;
  write(src + "/topology/h200_sxm_2.calibrated.json", two);

  DetectedMachine m1;
  m1.ok = true;
  m1.gpus = {"NVIDIA H200"};
  m1.nvlink_links = {0};
  DetectedMachine m2 = m1;
  m2.gpus = {"NVIDIA H200", "NVIDIA H200"};
  m2.nvlink_links = {18, 18};
  // Datasheet matching never takes a calibrated file.
  EXPECT_EQ(match_topology(m1, src), "");
  EXPECT_EQ(match_topology(m2, src), "h200_sxm_2");
  EXPECT_EQ(datasheet_for("NVIDIA H200", 1, src).name, "h200_sxm_2");

  CalibratedChoice c1 = find_calibrated("NVIDIA H200", 1, src);
  ASSERT_TRUE(c1.valid);
  EXPECT_EQ(c1.topo.name, "nvidia_h200_1.calibrated");
  EXPECT_EQ(c1.nvlink_source, "datasheet");
  CalibratedChoice c2 = find_calibrated("NVIDIA H200", 2, src);
  ASSERT_TRUE(c2.valid);
  EXPECT_EQ(c2.topo.name, "h200_sxm_2.calibrated");
  EXPECT_FALSE(find_calibrated("NVIDIA H200", 8, src).valid);
  EXPECT_FALSE(find_calibrated("NVIDIA H100 80GB HBM3", 1, src).valid);

  // pkb run --calibrated: "none" off; automatic only on cuda; a name or a path.
  EXPECT_FALSE(choose_calibrated("none", "cuda", src).valid);
  EXPECT_FALSE(choose_calibrated("", "cpu", src).valid);
  EXPECT_TRUE(choose_calibrated("nvidia_h200_1.calibrated", "cpu", src).valid);
  CalibratedChoice by_path = choose_calibrated(src + "/topology/h200_sxm_2.calibrated.json", "cuda", src);
  ASSERT_TRUE(by_path.valid);
  EXPECT_EQ(by_path.path, src + "/topology/h200_sxm_2.calibrated.json");
  EXPECT_THROW(load_calibrated("h200_sxm_2", src), Error);  // a datasheet is not a calibration
  EXPECT_THROW(load_calibrated(src + "/topology/missing.json", src), Error);
}

Json record_with_times() {
  Json r;
  r["cost"] = {{"nvlink_bytes_per_rank", 4.788e6}, {"hbm_bytes_per_rank", 4.8e6}, {"flops_per_rank", 0.0}};
  r["times"] = {{"reference_us", 40.0}, {"candidate_us", 20.0}};
  // As add_times writes it from the datasheet: NVLink 10 us, HBM 1 us.
  r["roofline"] = {{"t_roof_us", 10.0}, {"bound", "nvlink"}, {"reference_fraction", 0.25}, {"candidate_fraction", 0.5}};
  return r;
}

TEST(Calibration, RecordsCarryBothFractions) {
  CalibratedChoice c;
  c.valid = true;
  c.path = "/x/h200_sxm_2.calibrated.json";
  c.topo.name = "h200_sxm_2.calibrated";
  c.topo.nvlink_bw_per_dir = 399e9;  // 12 us for the cost above
  c.topo.hbm_bw = 4e12;              // 1.2 us
  c.topo.peak_bf16_flops = 700e12;
  c.nvlink_source = "measured";
  Json r = record_with_times();
  const Json before = r["roofline"];
  add_calibrated_roofline(r, c);
  ASSERT_TRUE(r["roofline"].contains("calibrated"));
  for (const auto& el : before.items()) EXPECT_EQ(r["roofline"][el.key()], el.value()) << el.key();  // unchanged
  const Json& cal = r["roofline"]["calibrated"];
  EXPECT_NEAR(cal["t_roof_us"].get<double>(), 12.0, 1e-9);
  EXPECT_EQ(cal["bound"], "nvlink");
  EXPECT_NEAR(cal["reference_fraction"].get<double>(), 0.3, 1e-9);
  EXPECT_NEAR(cal["candidate_fraction"].get<double>(), 0.6, 1e-9);
  EXPECT_EQ(cal["topology"], "h200_sxm_2.calibrated");
  EXPECT_EQ(cal["file"], c.path);
  EXPECT_EQ(cal["nvlink_source"], "measured");

  // HBM-bound under the calibrated rates.
  c.topo.hbm_bw = 0.3e12;  // 16 us
  r = record_with_times();
  add_calibrated_roofline(r, c);
  EXPECT_EQ(r["roofline"]["calibrated"]["bound"], "hbm");
  EXPECT_NEAR(r["roofline"]["calibrated"]["candidate_fraction"].get<double>(), 0.8, 1e-9);

  // No times (not timed, or failed): nothing added. No calibrated file: nothing added.
  Json untimed = record_with_times();
  untimed.erase("times");
  untimed.erase("roofline");
  add_calibrated_roofline(untimed, c);
  EXPECT_FALSE(untimed.contains("roofline"));
  Json plain = record_with_times();
  add_calibrated_roofline(plain, CalibratedChoice{});
  EXPECT_FALSE(plain["roofline"].contains("calibrated"));

  // No datasheet roofline (no matching datasheet): the calibrated one alone.
  Json alone = record_with_times();
  alone.erase("roofline");
  add_calibrated_roofline(alone, c);
  EXPECT_FALSE(alone["roofline"].contains("t_roof_us"));
  EXPECT_TRUE(alone["roofline"]["calibrated"].contains("candidate_fraction"));
}

TEST(Calibration, SummaryNamesEachRateAndItsSource) {
  std::string s = calibration_summary(make_calibrated_topology(one_gpu_input()));
  EXPECT_NE(s.find("HBM (read + write)"), std::string::npos) << s;
  EXPECT_NE(s.find("4.20 TB/s"), std::string::npos) << s;
  EXPECT_NE(s.find("4.80 TB/s"), std::string::npos) << s;
  EXPECT_NE(s.find("700 TFLOP/s"), std::string::npos) << s;
  EXPECT_NE(s.find("478.8 GB/s"), std::string::npos) << s;
  EXPECT_NE(s.find("datasheet: one GPU calibrated"), std::string::npos) << s;
  EXPECT_NE(s.find("kernel launch (us): 1.50 GPU back to back"), std::string::npos) << s;
  EXPECT_NE(s.find("cross-GPU barrier, device (us): - (absent: one GPU"), std::string::npos) << s;
  EXPECT_EQ(calibration_summary(Json::object()).find("rate"), 0u);  // never throws on a partial file
}

TEST(Calibration, MedianOf) {
  EXPECT_DOUBLE_EQ(median_of({}), 0.0);
  EXPECT_DOUBLE_EQ(median_of({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median_of({4, 1, 2, 3}), 2.5);
}

}  // namespace
}  // namespace pkb
