// One CUTLASS 3.x Hopper GEMM, assembled from the CollectiveBuilders, for the corpus.
// Each .cu picks the element types, tile, cluster and schedules; including this header then
// references the kernel's entry point so that `nvcc -ptx` emits it (no host launch code is
// needed to get the device PTX).
#pragma once

#include <cutlass/cutlass.h>
#include <cute/tensor.hpp>
#include <cutlass/device_kernel.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

namespace corpus {

using namespace cute;

// Alignments in elements: 16 bytes, the TMA minimum.
template <class T> inline constexpr int kAlign = 16 / static_cast<int>(sizeof(T));

template <class ProblemShape, class ElementA, class LayoutA, class ElementB, class LayoutB,
          class ElementC, class LayoutC, class ElementAcc, class TileShape, class ClusterShape,
          class MainloopSchedule, class EpilogueSchedule>
struct Gemm {
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAcc, ElementAcc,
      ElementC, LayoutC, kAlign<ElementC>, ElementC, LayoutC, kAlign<ElementC>,
      EpilogueSchedule>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      ElementA, LayoutA, kAlign<ElementA>, ElementB, LayoutB, kAlign<ElementB>, ElementAcc,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
};

}  // namespace corpus

// Taking the address of the entry point instantiates it, which is all -ptx needs.
#define CORPUS_EMIT_KERNEL(GEMM, NAME)                                                   \
  extern "C" void const* NAME() {                                                        \
    return reinterpret_cast<void const*>(&cutlass::device_kernel<GEMM::Kernel>);         \
  }
