// The CUDA C++ side of the TMA copy benchmark: the algorithm of benchmarks/tma_copy_kernel.py
// written with <cuda/ptx>, line for line (same roles, barriers, waits and release lag).
//
// Built at run time on the GPU machine:
//   nvcc -cubin -gencode arch=compute_90a,code=sm_90a -std=c++17 -O3 tma_copy.cu
//
// One persistent CTA per SM walks tiles ctaid.x, ctaid.x + nctaid.x, ... Thread 0 (producer)
// waits for an empty stage, arrives with expect_tx on its full barrier and issues the TMA
// load; thread 32 (consumer) waits for a full stage, issues the TMA store, commits a bulk
// group, and after wait_group.read<LAG> releases the stage of the store issued LAG tiles ago.
#include <cuda.h>
#include <cuda/ptx>
#include <cstdint>

namespace ptx = cuda::ptx;

#ifndef LAG
#define LAG 1
#endif

static __device__ __forceinline__ void wait_parity(uint64_t* bar, uint32_t parity) {
  while (!ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

template <int BOX_ROWS, int BOX_COLS, int STAGES>
__device__ __forceinline__ void tma_copy(const CUtensorMap& src_map, const CUtensorMap& dst_map,
                                         uint32_t tiles_x, uint32_t num_tiles) {
  constexpr uint32_t TILE_BYTES = BOX_ROWS * BOX_COLS * 4;
  // All shared memory is dynamic: the ring at offset 0, then the full and empty barriers.
  extern __shared__ __align__(1024) unsigned char ring[];
  uint64_t* full_bar = reinterpret_cast<uint64_t*>(ring + STAGES * TILE_BYTES);
  uint64_t* empty_bar = full_bar + STAGES;
  const uint32_t tid = threadIdx.x;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      ptx::mbarrier_init(&full_bar[s], 1);
      ptx::mbarrier_init(&empty_bar[s], 1);
    }
    // Make the initialised barriers visible to the async proxy (the TMA unit).
    ptx::fence_proxy_async(ptx::space_shared);
  }
  __syncthreads();

  if (tid == 0) {  // producer
    uint32_t stage = 0, phase = 0;
    for (uint32_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      // A fresh barrier counts its preceding phase as complete: wait on phase ^ 1.
      wait_parity(&empty_bar[stage], phase ^ 1);
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                     &full_bar[stage], TILE_BYTES);
      const uint32_t ty = tile / tiles_x;
      const int32_t coords[2] = {int32_t((tile - ty * tiles_x) * BOX_COLS),
                                 int32_t(ty * BOX_ROWS)};
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global,
                                ring + stage * TILE_BYTES, &src_map, coords, &full_bar[stage]);
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
  if (tid == 32) {  // consumer
    uint32_t stage = 0, phase = 0;
    uint32_t pending = STAGES;  // the stage whose store was issued LAG (= 1) tiles ago
    for (uint32_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      wait_parity(&full_bar[stage], phase);
      const uint32_t ty = tile / tiles_x;
      const int32_t coords[2] = {int32_t((tile - ty * tiles_x) * BOX_COLS),
                                 int32_t(ty * BOX_ROWS)};
      ptx::cp_async_bulk_tensor(ptx::space_global, ptx::space_shared, &dst_map, coords,
                                ring + stage * TILE_BYTES);
      ptx::cp_async_bulk_commit_group();
      // Every store but the newest LAG has finished reading its stage: release the oldest.
      ptx::cp_async_bulk_wait_group_read(ptx::n32_t<LAG>{});
#if LAG == 0
      ptx::mbarrier_arrive(&empty_bar[stage]);
#else
      if (pending != STAGES) {
        ptx::mbarrier_arrive(&empty_bar[pending]);
      }
      pending = stage;
#endif
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
    // The global writes must be complete before the CTA exits.
    ptx::cp_async_bulk_wait_group(ptx::n32_t<0>{});
  }
}

// One entry per configuration, named as the ptxdsl kernels are: tma_copy_<R>x<C>_s<S>.
#define TMA_COPY_ENTRY(R, C, S)                                                            \
  extern "C" __global__ void __launch_bounds__(64, 1) tma_copy_##R##x##C##_s##S(           \
      const __grid_constant__ CUtensorMap src_map, const __grid_constant__ CUtensorMap dst_map, \
      uint32_t tiles_x, uint32_t num_tiles) {                                              \
    tma_copy<R, C, S>(src_map, dst_map, tiles_x, num_tiles);                               \
  }

TMA_COPY_ENTRY(32, 256, 4)
TMA_COPY_ENTRY(16, 256, 8)
TMA_COPY_ENTRY(64, 128, 4)
TMA_COPY_ENTRY(32, 128, 6)
