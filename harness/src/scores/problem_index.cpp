#include "scores/problem_index.h"

namespace pkb {

// Mirrors the index table of shared/catalog/README.md (id | slug | category);
// keep the two in step. Problem 25 is Tensor Parallel there, matching the
// published category totals.
const std::vector<ProblemEntry>& problem_index() {
  static const std::vector<ProblemEntry> kIndex = {
      {1, "allreduce", "Collective Primitive"},
      {2, "allgather", "Collective Primitive"},
      {3, "broadcast", "Collective Primitive"},
      {4, "reduce", "Collective Primitive"},
      {5, "scatter", "Collective Primitive"},
      {6, "gather", "Collective Primitive"},
      {7, "reducescatter", "Collective Primitive"},
      {8, "alltoall", "Collective Primitive"},
      {9, "layernorm_backward", "Sequence Parallel"},
      {10, "embedding_lookup", "Tensor Parallel"},
      {11, "allgather_gemm_AT", "Tensor Parallel"},
      {12, "allgather_gemm", "Tensor Parallel"},
      {13, "gemm_allreduce", "Tensor Parallel"},
      {14, "gemm_allgather", "Tensor Parallel"},
      {15, "combined_sharded_gemms", "Tensor Parallel"},
      {16, "gemm_reducescatter", "Tensor Parallel"},
      {17, "rope_allgather", "Sequence Parallel"},
      {18, "tp_rms_norm", "Tensor Parallel"},
      {19, "blocked_fp8_quantize", "Tensor Parallel"},
      {20, "blocked_fp8_dequantize", "Tensor Parallel"},
      {21, "clip_grad_norm_no_ep", "FSDP/ZeRO"},
      {22, "clip_grad_norm_ep", "FSDP/ZeRO"},
      {23, "grad_acc_loss", "Data Parallel"},
      {24, "load_balancing_loss_fn", "Expert Parallel"},
      {25, "importance_sampling_loss", "Tensor Parallel"},
      {26, "moe_token_preprocess", "Expert Parallel"},
      {27, "moe_all2all_primitive", "Expert Parallel"},
      {28, "moe_pre_all2all", "Expert Parallel"},
      {29, "moe_post_all2all", "Expert Parallel"},
      {30, "moe_epgroupgemm_lora_backward", "Expert Parallel"},
      {31, "fused_moe_fwd", "Expert Parallel"},
      {32, "fused_moe_fwd_lora", "Expert Parallel"},
      {33, "ulysses_all_to_all_tensor_primitive", "Context Parallel"},
      {34, "ulysses_all_gather_into_tensor_primitive", "Context Parallel"},
      {35, "ulysses_all_gather_variable_primitive", "Context Parallel"},
      {36, "ulysses_gather_seq_scatter_heads", "Context Parallel"},
      {37, "ulysses_gather_heads_scatter_seq", "Context Parallel"},
      {38, "ulysses_gather_seq_scatter_heads_qkv", "Context Parallel"},
      {39, "ulysses_attention_e2e", "Context Parallel"},
      {40, "ddp", "Data Parallel"},
      {41, "zero1_optimizer_shard", "FSDP/ZeRO"},
      {42, "zero2_optimizer_shard_grad", "FSDP/ZeRO"},
      {43, "fused_adam_grad_unshard_allgather", "FSDP/ZeRO"},
      {44, "quantized_grad_allreduce", "Data Parallel"},
      {45, "reducescatter_fused_rmsnorm", "Tensor Parallel"},
      {46, "gemv_decode", "Tensor Parallel"},
      {47, "fsdp_step_e2e", "FSDP/ZeRO"},
      {48, "fsdp_and_tp", "FSDP/ZeRO"},
      {49, "moe_ep_balanced", "Expert Parallel"},
      {50, "moe_ep_wide", "Expert Parallel"},
      {51, "moe_ep_narrow", "Expert Parallel"},
      {52, "fp8_reduce_scatter_grads", "FSDP/ZeRO"},
      {53, "fp8_allgather_params", "FSDP/ZeRO"},
      {54, "ring_attention", "Context Parallel"},
      {55, "ring_attention_tp", "Tensor Parallel"},
      {56, "ring_attention_pp", "Pipeline Parallel"},
      {57, "ring_attention_backward_dp", "Data Parallel"},
      {58, "openclip_contrastive_loss", "Data Parallel"},
      {59, "physicsnemo_distributed_rfft", "Geometric/Spatial"},
      {60, "physicsnemo_distributed_irfft", "Geometric/Spatial"},
      {61, "gsplat_3d_gaussian_splatting", "Geometric/Spatial"},
      {62, "torchharmonics_spherical_convolution", "Geometric/Spatial"},
      {63, "deepmd_kalman_filter_optimizer", "Data Parallel"},
      {64, "gnn_neighbor_sampling", "Graph Parallel"},
      {65, "gnn_feature_exchange_all2all", "Graph Parallel"},
      {66, "gnn_feature_exchange_all2all_backward", "Graph Parallel"},
      {67, "gnn_sparse_embedding_all2all", "Graph Parallel"},
      {68, "gnn_sparse_feature_fetch_projection", "Graph Parallel"},
      {69, "gnn_negative_scoring", "Graph Parallel"},
      {70, "torchrec_kjt_all2all", "Other"},
      {71, "hyena_conv1d_boundary_exchange", "Context Parallel"},
      {72, "hyena_forward_cp", "Context Parallel"},
      {73, "vocab_parallel_cross_entropy_loss", "Vocab Parallel"},
      {74, "fla_kimi_delta_attention_cp_tp", "Tensor Parallel"},
      {75, "fla_gated_deltanet_cp", "Context Parallel"},
      {76, "opensora_conv3d_allreduce", "Tensor Parallel"},
      {77, "magi1_cso_async_attention", "Context Parallel"},
      {78, "magi1_tile_parallel_vae_decode", "Geometric/Spatial"},
      {79, "dinov2_distributed_knn", "Data Parallel"},
      {80, "dinov2_distributed_sinkhorn_knopp", "Data Parallel"},
      {81, "sam3_allgather_iou_suppression", "Data Parallel"},
      {82, "vocab_parallel_log_prob_topk", "Vocab Parallel"},
      {83, "vocab_parallel_log_prob_topk_chunked", "Vocab Parallel"},
      {84, "vocab_parallel_log_prob_topk_chunked_backward", "Vocab Parallel"},
      {85, "distributed_sample_sort", "Other"},
      {86, "tp_muon_orthogonalization", "Tensor Parallel"},
      {87, "conv2d_boundary_exchange", "Geometric/Spatial"},
  };
  return kIndex;
}

const std::vector<std::string>& category_order() {
  static const std::vector<std::string> kOrder = {
      "Collective Primitive", "Tensor Parallel", "Sequence Parallel", "Context Parallel",
      "Pipeline Parallel",    "Data Parallel",   "Expert Parallel",   "FSDP/ZeRO",
      "Vocab Parallel",       "Graph Parallel",  "Geometric/Spatial", "Other",
  };
  return kOrder;
}

const ProblemEntry* find_problem(int id) {
  const auto& index = problem_index();
  if (id < 1 || id > static_cast<int>(index.size())) return nullptr;
  return &index[id - 1];
}

}  // namespace pkb
