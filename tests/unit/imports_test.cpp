#include <gtest/gtest.h>

#include "driver/candidate_build.h"

namespace pkb {
namespace {

TEST(Imports, AllowsTorchAndCudaRuntime) {
  ImportCheck c = check_import_list({"at::_ops::add_Tensor::call(at::Tensor const&)", "cudaMemcpyAsync", "memcpy",
                                     "c10::TensorImpl::release_resources()"},
                                    {"libtorch_cpu.so", "libc10.so", "libcudart.so.13"});
  EXPECT_TRUE(c.ok) << c.reason;
}

TEST(Imports, RejectsCollectiveLibraries) {
  EXPECT_FALSE(check_import_list({"ncclAllReduce"}, {}).ok);
  EXPECT_FALSE(check_import_list({"pncclSend"}, {}).ok);
  EXPECT_FALSE(check_import_list({"MPI_Allreduce"}, {}).ok);
  EXPECT_FALSE(check_import_list({"c10d::ProcessGroupNCCL::allreduce(std::vector<at::Tensor>&)"}, {}).ok);
  EXPECT_FALSE(check_import_list({"pkb::Collectives::all_reduce()"}, {}).ok);
  EXPECT_FALSE(check_import_list({"dlsym"}, {}).ok);
  EXPECT_FALSE(check_import_list({}, {"libnccl.so.2"}).ok);
  EXPECT_FALSE(check_import_list({}, {"libmpi.so.40"}).ok);
}

TEST(Imports, ReasonNamesTheSymbol) {
  ImportCheck c = check_import_list({"memcpy", "ncclAllGather", "ncclSend"}, {});
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.reason.find("NCCL (ncclAllGather)"), std::string::npos) << c.reason;
  EXPECT_EQ(c.offending.size(), 2u);
}

}  // namespace
}  // namespace pkb
