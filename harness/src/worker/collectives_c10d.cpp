// The reference's collective facade over c10d backends.
//
// NOTE [facade calls are synchronous]
// Every call waits on its Work, as torch.distributed's synchronous calls do.
// On NCCL, Work::wait() makes the *current stream* wait for NCCL's internal
// stream; without it, events recorded on the current stream do not cover the
// collective at all (measured on 2xH200: a 128 MiB all-reduce read 20-27 us
// instead of 467 us). On Gloo, wait() blocks until the data has arrived.
//
// Ranks that share a GPU (NOTE [ranks sharing a GPU]) run these on Gloo over
// the CUDA tensors. Gloo copies CUDA tensors through pinned host memory
// itself for the collectives; point-to-point send/recv hand Gloo's transport
// the tensor's raw pointer, so those are staged through host memory here.
#include <map>

#include "pkb/check.h"
#include "worker/distributed.h"

namespace pkb {

namespace {

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return c10d::ReduceOp::SUM;
    case ReduceOp::kAvg: return c10d::ReduceOp::AVG;
    case ReduceOp::kMax: return c10d::ReduceOp::MAX;
    case ReduceOp::kMin: return c10d::ReduceOp::MIN;
    case ReduceOp::kProduct: return c10d::ReduceOp::PRODUCT;
  }
  PKB_CHECK(false, "unknown reduce op");
}

class C10dCollectives final : public Collectives {
 public:
  explicit C10dCollectives(Distributed& dist) : dist_(dist) {
    std::vector<int64_t> all(dist.world());
    for (int r = 0; r < dist.world(); ++r) all[r] = r;
    groups_.push_back({all, dist.world_backend()});
  }

  int rank(Group g) const override {
    const auto& gr = group(g);
    for (size_t i = 0; i < gr.ranks.size(); ++i)
      if (gr.ranks[i] == dist_.rank()) return static_cast<int>(i);
    return -1;
  }
  int world_size(Group g) const override { return static_cast<int>(group(g).ranks.size()); }

  Group new_group(const std::vector<int64_t>& ranks) override {
    int id = static_cast<int>(groups_.size());
    auto backend = dist_.make_backend(ranks, std::to_string(id));
    groups_.push_back({ranks, backend});
    return Group{id};
  }

  void all_reduce(at::Tensor& t, ReduceOp op, Group g) override {
    if (op == ReduceOp::kAvg && dist_.uses_gloo()) {
      // Gloo has no AVG: sum, then divide like NCCL's average of a sum.
      all_reduce(t, ReduceOp::kSum, g);
      t.div_(world_size(g));
      return;
    }
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = to_c10d(op);
    backend(g)->allreduce(v, o)->wait();
  }

  void all_gather(std::vector<at::Tensor>& out, const at::Tensor& in, Group g) override {
    PKB_CHECK(static_cast<int>(out.size()) == world_size(g), "all_gather needs ", world_size(g),
              " output tensors, got ", out.size());
    std::vector<std::vector<at::Tensor>> o{out};
    std::vector<at::Tensor> i{in};
    backend(g)->allgather(o, i)->wait();
    for (size_t k = 0; k < out.size(); ++k)
      if (!o[0][k].is_same(out[k])) out[k].copy_(o[0][k]);
  }

  // Like torch.distributed, any output shape with W times the input's elements
  // is accepted ((W, M, N) or (W*M, N)); backends want flat chunks.
  void all_gather_into_tensor(at::Tensor& out, const at::Tensor& in, Group g) override {
    PKB_CHECK(out.is_contiguous() && in.is_contiguous(), "all_gather_into_tensor needs contiguous tensors");
    PKB_CHECK(out.numel() == in.numel() * world_size(g), "all_gather_into_tensor: output has ", out.numel(),
              " elements, expected ", in.numel() * world_size(g));
    at::Tensor o = out.view({-1}), i = in.view({-1});
    backend(g)->_allgather_base(o, i)->wait();
  }

  void reduce_scatter_tensor(at::Tensor& out, const at::Tensor& in, ReduceOp op, Group g) override {
    PKB_CHECK(out.is_contiguous() && in.is_contiguous(), "reduce_scatter_tensor needs contiguous tensors");
    PKB_CHECK(in.numel() == out.numel() * world_size(g), "reduce_scatter_tensor: input has ", in.numel(),
              " elements, expected ", out.numel() * world_size(g));
    at::Tensor o = out.view({-1}), i = in.view({-1});
    c10d::ReduceScatterOptions opts;
    opts.reduceOp = to_c10d(op);
    backend(g)->_reduce_scatter_base(o, i, opts)->wait();
  }

  void all_to_all_single(at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_splits,
                         const std::vector<int64_t>& in_splits, Group g) override {
    at::Tensor i = in;
    std::vector<int64_t> os = out_splits, is = in_splits;
    backend(g)->alltoall_base(out, i, os, is)->wait();
  }

  void broadcast(at::Tensor& t, int src, Group g) override {
    std::vector<at::Tensor> v{t};
    c10d::BroadcastOptions o;
    o.rootRank = group_rank_of(src, g);
    backend(g)->broadcast(v, o)->wait();
  }

  void reduce(at::Tensor& t, int dst, ReduceOp op, Group g) override {
    std::vector<at::Tensor> v{t};
    c10d::ReduceOptions o;
    o.reduceOp = to_c10d(op);
    o.rootRank = group_rank_of(dst, g);
    backend(g)->reduce(v, o)->wait();
  }

  void gather(const at::Tensor& in, std::vector<at::Tensor>* out, int dst, Group g) override {
    c10d::GatherOptions o;
    o.rootRank = group_rank_of(dst, g);
    std::vector<std::vector<at::Tensor>> outs;
    if (rank(g) == o.rootRank) {
      PKB_CHECK(out != nullptr && static_cast<int>(out->size()) == world_size(g), "gather on dst needs ",
                world_size(g), " output tensors");
      outs.push_back(*out);
    }
    std::vector<at::Tensor> i{in};
    backend(g)->gather(outs, i, o)->wait();
  }

  void scatter(at::Tensor& out, const std::vector<at::Tensor>* in, int src, Group g) override {
    c10d::ScatterOptions o;
    o.rootRank = group_rank_of(src, g);
    std::vector<std::vector<at::Tensor>> ins;
    if (rank(g) == o.rootRank) {
      PKB_CHECK(in != nullptr && static_cast<int>(in->size()) == world_size(g), "scatter on src needs ",
                world_size(g), " input tensors");
      ins.push_back(*in);
    }
    std::vector<at::Tensor> v{out};
    backend(g)->scatter(v, ins, o)->wait();
  }

  void send(const at::Tensor& t, int dst, int tag, Group g) override {
    std::vector<at::Tensor> v{stage_p2p() ? t.to(at::kCPU).contiguous() : t};
    backend(g)->send(v, group_rank_of(dst, g), tag)->wait();
  }

  void recv(at::Tensor& t, int src, int tag, Group g) override {
    at::Tensor host = stage_p2p() ? at::empty(t.sizes(), t.options().device(at::kCPU)) : t;
    std::vector<at::Tensor> v{host};
    backend(g)->recv(v, group_rank_of(src, g), tag)->wait();
    if (stage_p2p()) t.copy_(host);
  }

  void barrier(Group g) override {
    c10d::BarrierOptions o;
    if (dist_.device().is_cuda() && !dist_.uses_gloo()) o.device_ids = {dist_.device().index()};
    backend(g)->barrier(o)->wait();
  }

 private:
  struct GroupState {
    std::vector<int64_t> ranks;
    c10::intrusive_ptr<c10d::Backend> backend;
  };

  const GroupState& group(Group g) const {
    PKB_CHECK(g.id >= 0 && g.id < static_cast<int>(groups_.size()), "unknown process group ", g.id);
    return groups_[g.id];
  }
  const c10::intrusive_ptr<c10d::Backend>& backend(Group g) const {
    const auto& gr = group(g);
    PKB_CHECK(gr.backend, "rank ", dist_.rank(), " is not a member of process group ", g.id);
    return gr.backend;
  }
  int group_rank_of(int global_rank, Group g) const {
    const auto& gr = group(g);
    for (size_t i = 0; i < gr.ranks.size(); ++i)
      if (gr.ranks[i] == global_rank) return static_cast<int>(i);
    PKB_CHECK(false, "rank ", global_rank, " is not in process group ", g.id);
  }

  bool stage_p2p() const { return dist_.device().is_cuda() && dist_.uses_gloo(); }

  Distributed& dist_;
  std::vector<GroupState> groups_;
};

}  // namespace

std::unique_ptr<Collectives> make_c10d_collectives(Distributed& dist) {
  return std::make_unique<C10dCollectives>(dist);
}

}  // namespace pkb
