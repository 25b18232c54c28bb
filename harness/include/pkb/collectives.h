// The torch.distributed-like facade the references use. Candidates never get
// one: the harness hands it only to reference(), and the driver rejects a
// candidate whose shared object imports collective libraries.
//
// Ranks passed as src/dst are global ranks, as in torch.distributed.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace pkb {

enum class ReduceOp { kSum, kAvg, kMax, kMin, kProduct };

// A process group: kWorld, or what new_group() returned.
struct Group {
  int id = 0;
  bool operator==(const Group& o) const { return id == o.id; }
};
inline constexpr Group kWorld{0};

class Collectives {
 public:
  virtual ~Collectives() = default;

  virtual int rank(Group g = kWorld) const = 0;        // -1 when not a member
  virtual int world_size(Group g = kWorld) const = 0;
  // Collective over the whole world, like torch.distributed.new_group: every
  // rank calls it with the same ranks; non-members get a group they cannot use.
  virtual Group new_group(const std::vector<int64_t>& ranks) = 0;

  virtual void all_reduce(at::Tensor& t, ReduceOp op = ReduceOp::kSum, Group g = kWorld) = 0;
  virtual void all_gather(std::vector<at::Tensor>& out, const at::Tensor& in, Group g = kWorld) = 0;
  virtual void all_gather_into_tensor(at::Tensor& out, const at::Tensor& in, Group g = kWorld) = 0;
  virtual void reduce_scatter_tensor(at::Tensor& out, const at::Tensor& in,
                                     ReduceOp op = ReduceOp::kSum, Group g = kWorld) = 0;
  // Empty split lists mean equal splits along dim 0.
  virtual void all_to_all_single(at::Tensor& out, const at::Tensor& in,
                                 const std::vector<int64_t>& out_splits = {},
                                 const std::vector<int64_t>& in_splits = {}, Group g = kWorld) = 0;
  virtual void broadcast(at::Tensor& t, int src, Group g = kWorld) = 0;
  virtual void reduce(at::Tensor& t, int dst, ReduceOp op = ReduceOp::kSum, Group g = kWorld) = 0;
  // `out` is read only on dst (W tensors shaped like `in`).
  virtual void gather(const at::Tensor& in, std::vector<at::Tensor>* out, int dst, Group g = kWorld) = 0;
  // `in` is read only on src (W tensors shaped like `out`).
  virtual void scatter(at::Tensor& out, const std::vector<at::Tensor>* in, int src, Group g = kWorld) = 0;
  virtual void send(const at::Tensor& t, int dst, int tag = 0, Group g = kWorld) = 0;
  virtual void recv(at::Tensor& t, int src, int tag = 0, Group g = kWorld) = 0;
  virtual void barrier(Group g = kWorld) = 0;
};

}  // namespace pkb
