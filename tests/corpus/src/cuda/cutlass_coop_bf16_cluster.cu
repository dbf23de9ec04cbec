// bf16 GEMM, cooperative (two consumer warpgroups share one tile), 2x1 cluster so the B
// tile is TMA-multicast to both CTAs.
#include "cutlass_gemm.cuh"

using G = corpus::Gemm<cute::Shape<int, int, int, int>,
                       cutlass::bfloat16_t, cutlass::layout::RowMajor,
                       cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                       cutlass::bfloat16_t, cutlass::layout::RowMajor, float,
                       cute::Shape<cute::_256, cute::_128, cute::_64>,
                       cute::Shape<cute::_2, cute::_1, cute::_1>,
                       cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                       cutlass::epilogue::TmaWarpSpecializedCooperative>;
CORPUS_EMIT_KERNEL(G, corpus_cutlass_coop_bf16_cluster)
