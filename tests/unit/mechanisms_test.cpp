#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>

#include "driver/candidate_build.h"
#include "driver/mechanisms.h"
#include "pkb/check.h"

namespace pkb {
namespace {

const std::string kFixtures = std::string(PKB_SOURCE_DIR) + "/tests/fixtures/mechanisms/";

std::vector<std::string> names(const Mechanisms& m) {
  std::vector<std::string> out;
  for (const auto& x : m) out.push_back(x.name);
  return out;
}

std::string evidence(const Mechanisms& m, const std::string& name) {
  for (const auto& x : m)
    if (x.name == name) return x.evidence;
  return "";
}

using Names = std::vector<std::string>;

// ---- the parsers, on text cut from cuobjdump output (sm_90a, nvcc 13.0) ----

TEST(MechanismParse, SassLoadsStoresAndAtomics) {
  const std::string sass = R"X(
	code for sm_90a
		Function : _ZN12_GLOBAL__N_18peer_sumEPKPKfPfii
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
        /*0090*/              @!P0 LDG.E.64 R2, desc[UR4][R2.64] ;              /* 0x0000000402028981 */
        /*00a0*/                   LDS.128 R4, [R0] ;                           /* 0x0000000000047984 */
        /*00b0*/                   STG.E desc[UR4][R6.64], R5 ;                 /* 0x0000000506007986 */
        /*00c0*/               @P0 REDG.E.ADD.STRONG.SYS desc[UR4][R8.64], R15 ;   /* 0x0000000f0800098e */
        /*00d0*/                   EXIT ;                                       /* 0x000000000000794d */
)X";
  Mechanisms m = mechanisms_from_sass(sass);
  ASSERT_EQ(names(m), Names{"sm_load_store"});
  EXPECT_EQ(m[0].evidence, "SASS LDG, STG, REDG in peer_sum");
}

TEST(MechanismParse, SassTmaAndMulticast) {
  const std::string sass = R"X(
		Function : _Z9bulk_copyPKcPc
        /*0150*/                   UBLKCP.S.G [UR6], [UR4], UR8 ;               /* 0x00000006040073ba */
        /*0250*/                   UBLKCP.G.S [UR4], [UR6], UR7 ;               /* 0x00000004060073ba */
		Function : _Z6tensorPKvii
        /*00a0*/                   UTMALDG.2D [UR4], [UR8] ;                    /* 0x00000004080075b4 */
        /*00e0*/                   UTMACMDFLUSH ;                               /* 0x00000000000079b7 */
		Function : _Z13multicast_sumP5uint4i
        /*0100*/                   LDGMC.E.F32ADD.BF16x8.RN.STRONG.SYS R4, [R2.64+URZ] ;   /* 0x00000000020479b4 */
        /*0110*/                   STG.E.128.STRONG.SYS desc[UR4][R2.64], R4 ;  /* 0x0000000402007986 */
)X";
  Mechanisms m = mechanisms_from_sass(sass);
  ASSERT_EQ(names(m), (Names{"sm_load_store", "tma", "nvls"}));
  EXPECT_EQ(evidence(m, "tma"), "SASS UBLKCP, UTMALDG in bulk_copy, tensor");
  EXPECT_EQ(evidence(m, "nvls"), "SASS LDGMC in multicast_sum");
  EXPECT_EQ(evidence(m, "sm_load_store"), "SASS STG in multicast_sum");
}

TEST(MechanismParse, SassWithoutMemoryInstructionsIsEmpty) {
  EXPECT_TRUE(mechanisms_from_sass("\t\tFunction : _Z1kv\n        /*0000*/   EXIT ;  /* 0x0 */\n").empty());
  EXPECT_TRUE(mechanisms_from_sass("").empty());
}

TEST(MechanismParse, PtxBulkCopiesAndMultimem) {
  const std::string ptx = R"X(
.visible .entry _Z9bulk_copyPKcPc(
	.param .u64 _Z9bulk_copyPKcPc_param_0
)
{
	ld.param.u64 	%rd1, [_Z9bulk_copyPKcPc_param_0];
	cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r4], [%rd1], 4096, [%r2];
	cp.async.bulk.commit_group;
	cp.async.bulk.wait_group 0;
}
.func  (.param .b32 func_retval0) _Z6helperPj(
	.param .b64 _Z6helperPj_param_0
)
{
	@%p1 multimem.red.relaxed.sys.global.add.u32 [%rd1], %r14;
}
.visible .entry _Z13multicast_sumP5uint4i(
)
{
	multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.bf16x2 {%r6,%r7,%r8,%r9}, [%rd4];
	multimem.st.relaxed.sys.global.v4.f32 [%rd4], {%r6,%r7,%r8,%r9};
	st.global.v4.u32 [%rd8], {%r6, %r7, %r8, %r9};
}
)X";
  Mechanisms m = mechanisms_from_ptx(ptx);
  ASSERT_EQ(names(m), (Names{"tma", "nvls"}));
  EXPECT_EQ(evidence(m, "tma"), "PTX cp.async.bulk in bulk_copy");
  EXPECT_EQ(evidence(m, "nvls"), "PTX multimem.red, multimem.ld_reduce, multimem.st in helper, multicast_sum");
}

TEST(MechanismParse, OnlyBulkCommitAndWaitIsNotACopy) {
  EXPECT_TRUE(mechanisms_from_ptx(".visible .entry _Z1kv(\n)\n{\n\tcp.async.bulk.commit_group;\n"
                                  "\tcp.async.bulk.wait_group.read 0;\n}\n")
                  .empty());
}

TEST(MechanismParse, ImportsNameTheCopyEngine) {
  Mechanisms m = mechanisms_from_imports({"memcpy", "cudaMemcpyAsync", "cudaMemcpyPeerAsync", "cudaLaunchKernel",
                                          "cudaMemcpyAsync", "cuMemcpyDtoDAsync_v2"});
  ASSERT_EQ(names(m), Names{"copy_engine"});
  EXPECT_NE(m[0].evidence.find("cudaMemcpyAsync, cudaMemcpyPeerAsync, cuMemcpyDtoDAsync_v2"), std::string::npos)
      << m[0].evidence;
  EXPECT_TRUE(mechanisms_from_imports({"memcpy", "cudaLaunchKernel", "cudaMemsetAsync"}).empty());
}

TEST(MechanismParse, MergeKeepsTheOrderAndJoinsEvidence) {
  Mechanisms m = merge_mechanisms({{{"nvls", "SASS LDGMC in k"}, {"tma", "SASS UBLKCP in k"}},
                                   {{"nvls", "PTX multimem.st in k"}},
                                   {{"copy_engine", "imports cudaMemcpyAsync"}}});
  ASSERT_EQ(names(m), (Names{"copy_engine", "tma", "nvls"}));
  EXPECT_EQ(evidence(m, "nvls"), "SASS LDGMC in k; PTX multimem.st in k");
}

TEST(MechanismParse, BriefForTables) {
  EXPECT_EQ(mechanisms_brief(mechanisms_json({{"copy_engine", ""}, {"sm_load_store", ""}, {"tma", ""}, {"nvls", ""}})),
            "ce+ldst+tma+nvls");
  EXPECT_EQ(mechanisms_brief(mechanisms_json({{"none", "host code only"}})), "none");
  EXPECT_EQ(mechanisms_brief(mechanisms_json({{"copy_engine", ""}, {"unknown", "no cuobjdump"}})), "ce+?");
  EXPECT_EQ(mechanisms_brief(Json()), "");  // a reference record has none
}

// ---- the fixtures, compiled here with the candidates' toolchain ----

class MechanismDetect : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tc_ = CandidateToolchain::load(PKB_BINARY_DIR);
    std::string tmpl = ::testing::TempDir() + "pkb_mechanisms_XXXXXX";
    PKB_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    dir_ = tmpl;
  }
  static void TearDownTestSuite() { run_command("rm -rf '" + dir_ + "'", nullptr); }

  // Why the GPU fixtures cannot be compiled or read here, or "".
  static std::string missing_tools(bool need_cuobjdump = true) {
    if (tc_.nvcc.empty() || access(tc_.nvcc.c_str(), X_OK) != 0)
      return "nvcc is absent (this pkb was configured without CUDA)";
    if (need_cuobjdump && find_cuobjdump(tc_).empty())
      return "cuobjdump is absent (not in PKB_CUOBJDUMP, pkb_build.json, beside nvcc nor on PATH)";
    return "";
  }

  // Each fixture is compiled once per run (nvcc takes seconds).
  static std::string compile(const std::string& fixture) {
    auto it = built_.find(fixture);
    if (it != built_.end()) return it->second;
    bool cuda = fixture.size() > 3 && fixture.substr(fixture.size() - 3) == ".cu";
    std::string cmd = cuda ? tc_.nvcc : tc_.cxx;
    for (const auto& f : cuda ? tc_.cuda_flags : tc_.cxx_flags) cmd += " '" + f + "'";
    std::string so = dir_ + "/" + fixture + ".so";
    cmd += " -o '" + so + "' '" + kFixtures + fixture + "'";
    int st = 0;
    std::string out = run_command(cmd, &st, 300);
    PKB_CHECK(st == 0, "compiling ", fixture, " failed:\n$ ", cmd, "\n", out);
    return built_[fixture] = so;
  }

  static Mechanisms detect(const std::string& fixture) {
    return detect_mechanisms(compile(fixture), find_cuobjdump(tc_));
  }

  static CandidateToolchain tc_;
  static std::string dir_;
  static std::map<std::string, std::string> built_;
};

CandidateToolchain MechanismDetect::tc_;
std::string MechanismDetect::dir_;
std::map<std::string, std::string> MechanismDetect::built_;

#define PKB_SKIP_WITHOUT_TOOLS(...)                                   \
  do {                                                                \
    std::string why = missing_tools(__VA_ARGS__);                     \
    if (!why.empty()) GTEST_SKIP() << why;                            \
  } while (0)

TEST_F(MechanismDetect, PeerLoadsAndStoresAreSmLoadStore) {
  PKB_SKIP_WITHOUT_TOOLS();
  Mechanisms m = detect("peer_load_store.cu");
  ASSERT_EQ(names(m), Names{"sm_load_store"}) << mechanisms_json(m).dump();
  EXPECT_NE(evidence(m, "sm_load_store").find("LDG"), std::string::npos);
  EXPECT_NE(evidence(m, "sm_load_store").find("STG"), std::string::npos);
  EXPECT_NE(evidence(m, "sm_load_store").find(" in peer_sum"), std::string::npos) << evidence(m, "sm_load_store");
}

TEST_F(MechanismDetect, CpAsyncBulkIsTma) {
  PKB_SKIP_WITHOUT_TOOLS();
  Mechanisms m = detect("tma_bulk.cu");
  ASSERT_TRUE(has_mechanism(m, "tma")) << mechanisms_json(m).dump();
  EXPECT_FALSE(has_mechanism(m, "nvls"));
  EXPECT_FALSE(has_mechanism(m, "copy_engine"));
  EXPECT_NE(evidence(m, "tma").find("SASS UBLKCP in bulk_copy"), std::string::npos) << evidence(m, "tma");
  EXPECT_NE(evidence(m, "tma").find("PTX cp.async.bulk in bulk_copy"), std::string::npos) << evidence(m, "tma");
}

TEST_F(MechanismDetect, MultimemIsNvls) {
  PKB_SKIP_WITHOUT_TOOLS();
  Mechanisms m = detect("nvls_multimem.cu");
  ASSERT_TRUE(has_mechanism(m, "nvls")) << mechanisms_json(m).dump();
  EXPECT_FALSE(has_mechanism(m, "tma"));
  // ld_reduce has its own opcode; multimem.st is an STG in SASS and shows in the PTX only.
  EXPECT_NE(evidence(m, "nvls").find("SASS LDGMC"), std::string::npos) << evidence(m, "nvls");
  EXPECT_NE(evidence(m, "nvls").find("multimem.ld_reduce, multimem.st"), std::string::npos) << evidence(m, "nvls");
}

TEST_F(MechanismDetect, CudaMemcpyAsyncIsTheCopyEngine) {
  PKB_SKIP_WITHOUT_TOOLS();
  Mechanisms m = detect("copy_engine.cu");
  ASSERT_EQ(names(m), Names{"copy_engine"}) << mechanisms_json(m).dump();
  EXPECT_NE(evidence(m, "copy_engine").find("cudaMemcpyAsync"), std::string::npos);
  EXPECT_NE(evidence(m, "copy_engine").find("cudaMemcpyPeerAsync"), std::string::npos);
}

TEST_F(MechanismDetect, CpuCandidateIsNone) {
  // Host code needs neither nvcc nor cuobjdump: this runs on every build.
  Mechanisms m = detect_mechanisms(compile("host_only.cpp"), "");
  ASSERT_EQ(names(m), Names{"none"}) << mechanisms_json(m).dump();
}

TEST_F(MechanismDetect, WithoutCuobjdumpTheKernelsAreUnknown) {
  PKB_SKIP_WITHOUT_TOOLS(/*need_cuobjdump=*/false);
  Mechanisms m = detect_mechanisms(compile("copy_engine.cu"), "");
  // The imports are still read; the device code is said to be unread, with why.
  ASSERT_EQ(names(m), (Names{"copy_engine", "unknown"})) << mechanisms_json(m).dump();
  EXPECT_NE(evidence(m, "unknown").find("cuobjdump was not found"), std::string::npos);
  Mechanisms bad = detect_mechanisms(compile("peer_load_store.cu"), "/bin/false");
  ASSERT_EQ(names(bad), Names{"unknown"}) << mechanisms_json(bad).dump();
  EXPECT_NE(evidence(bad, "unknown").find("cuobjdump failed"), std::string::npos);
}

}  // namespace
}  // namespace pkb
