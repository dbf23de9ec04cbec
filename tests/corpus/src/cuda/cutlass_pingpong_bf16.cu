// bf16 GEMM, ping-pong: two consumer warpgroups take turns on alternate tiles.
#include "cutlass_gemm.cuh"

using G = corpus::Gemm<cute::Shape<int, int, int, int>,
                       cutlass::bfloat16_t, cutlass::layout::RowMajor,
                       cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                       cutlass::bfloat16_t, cutlass::layout::RowMajor, float,
                       cute::Shape<cute::_64, cute::_128, cute::_64>,
                       cute::Shape<cute::_1, cute::_1, cute::_1>,
                       cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                       cutlass::epilogue::TmaWarpSpecialized>;
CORPUS_EMIT_KERNEL(G, corpus_cutlass_pingpong_bf16)
