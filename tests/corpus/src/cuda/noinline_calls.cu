// The 2-D TMA ring of tma_ring_2d.cu with its steps in separate, non-inlined device functions,
// so the PTX has .func definitions, prototypes and call sites with parameters and return
// values (a checker must follow the mbarrier protocol across calls). Clean.
#include "ptx_common.cuh"

constexpr int kStages = 2;
constexpr int kThreads = 128;

__device__ __noinline__ void init_ring(uint64_t* full, uint64_t* empty) {
  for (int s = 0; s < kStages; ++s) {
    ptx::mbarrier_init(&full[s], 1);
    ptx::mbarrier_init(&empty[s], kThreads);
  }
  ptx::fence_proxy_async(ptx::space_shared);
}

__device__ __noinline__ void load_tile(const CUtensorMap* tmap, float* dst, uint64_t* bar,
                                       int row) {
  ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bar,
                                 corpus::tile_bytes());
  const int32_t coords[2] = {0, row};
  ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst, tmap, coords, bar);
}

// Returns whether the phase of the given parity has completed (one try, not a loop).
__device__ __noinline__ bool try_phase(uint64_t* bar, uint32_t parity) {
  return ptx::mbarrier_try_wait_parity(bar, parity);
}

__device__ __noinline__ float partial_sum(const float* tile) {
  float acc = 0.f;
  for (int j = threadIdx.x; j < corpus::kBox * corpus::kBox; j += kThreads) acc += tile[j];
  return acc;
}

__global__ void __launch_bounds__(kThreads)
ring_with_calls(const __grid_constant__ CUtensorMap tmap, float* out, int ntiles) {
  __shared__ alignas(128) float tile[kStages][corpus::kBox * corpus::kBox];
  __shared__ uint64_t full[kStages];
  __shared__ uint64_t empty[kStages];

  if (threadIdx.x == 0) init_ring(full, empty);
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages && i < ntiles; ++i) {
      load_tile(&tmap, tile[i], &full[i], i * corpus::kBox);
    }
  }
  float acc = 0.f;
  for (int i = 0; i < ntiles; ++i) {
    const int s = i % kStages;
    const uint32_t parity = (i / kStages) & 1;
    while (!try_phase(&full[s], parity)) {
    }
    acc += partial_sum(tile[s]);
    ptx::mbarrier_arrive(&empty[s]);
    if (threadIdx.x == 0 && i + kStages < ntiles) {
      while (!try_phase(&empty[s], parity)) {
      }
      load_tile(&tmap, tile[s], &full[s], (i + kStages) * corpus::kBox);
    }
  }
  out[blockIdx.x * kThreads + threadIdx.x] = acc;
}
