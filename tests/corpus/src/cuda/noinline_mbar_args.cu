// The 2-D TMA ring of tma_ring_2d.cu with its mbarrier steps in __noinline__ device functions
// that take the barrier by pointer, so nvcc passes it through the `.param` ABI (st.param into
// the call's param, ld.param in the callee): a scalar pointer, a by-value struct (a byte-array
// `.param .b8 [16]`) and a returned pointer. A checker must bind those to know which barrier
// a helper waits on or arrives at. Clean unless built with CORPUS_BUG_WAIT_WRONG_BARRIER.
// Self-contained (not ptx_common.cuh): it is built with the local nvcc 13.0, whose CCCL has
// no cuda::ptx::elect_sync.
#include <cuda.h>
#include <cuda/ptx>
#include <cstdint>

namespace ptx = cuda::ptx;

constexpr int kStages = 2;
constexpr int kThreads = 128;
constexpr int kBox = 32;
__host__ __device__ constexpr uint32_t tile_bytes() { return kBox * kBox * sizeof(float); }

struct Wait {
  uint64_t* bar;
  uint32_t parity;
};

// A stage's barrier, returned (through `func_retval0`).
__device__ __noinline__ uint64_t* stage_bar(uint64_t* bars, int s) { return &bars[s]; }

// The wait, on a barrier and parity passed in one struct by value.
__device__ __noinline__ void wait_stage(Wait w) { 
  while (!ptx::mbarrier_try_wait_parity(w.bar, w.parity)) {
  }
 }

// The release, on a barrier passed by pointer.
__device__ __noinline__ void release_stage(uint64_t* bar) { ptx::mbarrier_arrive(bar); }

__device__ __noinline__ void load_stage(const CUtensorMap* tmap, float* dst, uint64_t* bar,
                                        int row) {
  ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bar,
                                 tile_bytes());
  const int32_t coords[2] = {0, row};
  ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst, tmap, coords, bar);
}

__global__ void __launch_bounds__(kThreads)
ring_with_barrier_args(const __grid_constant__ CUtensorMap tmap, float* out, int ntiles) {
  __shared__ alignas(128) float tile[kStages][kBox * kBox];
  __shared__ uint64_t full[kStages];
  __shared__ uint64_t empty[kStages];
  const int tid = threadIdx.x;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], kThreads);
    }
    ptx::fence_proxy_async(ptx::space_shared);
  }
  __syncthreads();
  if (tid == 0) {
    for (int i = 0; i < kStages && i < ntiles; ++i)
      load_stage(&tmap, tile[i], stage_bar(full, i), i * kBox);
  }
  float acc = 0.f;
  for (int i = 0; i < ntiles; ++i) {
    const int s = i % kStages;
    const uint32_t parity = (i / kStages) & 1;
#if defined(CORPUS_BUG_WAIT_WRONG_BARRIER)
    // BUG: waits on the stage's empty barrier, not the full one its TMA load completes.
    wait_stage(Wait{stage_bar(empty, s), parity});
#else
    wait_stage(Wait{stage_bar(full, s), parity});
#endif
    for (int j = tid; j < kBox * kBox; j += kThreads) acc += tile[s][j];
    release_stage(stage_bar(empty, s));
    if (tid == 0 && i + kStages < ntiles) {
      wait_stage(Wait{stage_bar(empty, s), parity});
      load_stage(&tmap, tile[s], stage_bar(full, s), (i + kStages) * kBox);
    }
  }
  out[blockIdx.x * kThreads + tid] = acc;
}
