// FP8 (e4m3 x e4m3 -> f32 accumulate, bf16 out) GEMM, cooperative with fast accumulation.
#include "cutlass_gemm.cuh"

using G = corpus::Gemm<cute::Shape<int, int, int, int>,
                       cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                       cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                       cutlass::bfloat16_t, cutlass::layout::RowMajor, float,
                       cute::Shape<cute::_128, cute::_128, cute::_128>,
                       cute::Shape<cute::_1, cute::_2, cute::_1>,
                       cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum,
                       cutlass::epilogue::TmaWarpSpecializedCooperative>;
CORPUS_EMIT_KERNEL(G, corpus_cutlass_fp8)
