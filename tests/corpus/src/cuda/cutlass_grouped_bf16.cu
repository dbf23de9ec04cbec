// Grouped bf16 GEMM (ptr-array): each group has its own pointers and shape, so the kernel
// rewrites its TMA descriptors on the device (tensormap.replace in a global workspace) when
// it moves to another group.
#include "cutlass_gemm.cuh"

using G = corpus::Gemm<cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>,
                       cutlass::bfloat16_t, cutlass::layout::RowMajor*,
                       cutlass::bfloat16_t, cutlass::layout::ColumnMajor*,
                       cutlass::bfloat16_t, cutlass::layout::RowMajor*, float,
                       cute::Shape<cute::_128, cute::_128, cute::_64>,
                       cute::Shape<cute::_1, cute::_1, cute::_1>,
                       cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                       cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
CORPUS_EMIT_KERNEL(G, corpus_cutlass_grouped_bf16)
