// A 4-stage ring of 2-D TMA tile loads into one CTA: thread 0 produces (expect_tx + TMA),
// every thread consumes and arrives on the stage's empty barrier, thread 0 refills the stage
// once all 128 threads have freed it. Clean unless built with one of the CORPUS_BUG_* macros
// below (build.py makes one buggy variant per macro).
#include "ptx_common.cuh"

constexpr int kStages = 4;
constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads)
tma_ring_sum(const __grid_constant__ CUtensorMap tmap, float* out, int ntiles) {
  __shared__ alignas(128) float tile[kStages][corpus::kBox * corpus::kBox];
  __shared__ uint64_t full[kStages];
  __shared__ uint64_t empty[kStages];
  const int tid = threadIdx.x;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], kThreads);
    }
    // The TMA unit (async proxy) must see the initialised barriers.
    ptx::fence_proxy_async(ptx::space_shared);
  }
  __syncthreads();

  auto issue = [&](int i) {
    const int s = i % kStages;
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                   &full[s], corpus::tile_bytes());
    const int32_t coords[2] = {0, i * corpus::kBox};
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile[s], &tmap, coords,
                              &full[s]);
  };
  if (tid == 0) {
    for (int i = 0; i < kStages && i < ntiles; ++i) issue(i);
  }

  float acc = 0.f;
  for (int i = 0; i < ntiles; ++i) {
    const int s = i % kStages;
#if defined(CORPUS_BUG_PARITY_PER_ITERATION)
    // BUG: flips every iteration, but each barrier completes one phase every kStages.
    const uint32_t parity = i & 1;
#else
    const uint32_t parity = (i / kStages) & 1;
#endif
#if !defined(CORPUS_BUG_READ_BEFORE_WAIT)
    corpus::wait_parity(&full[s], parity);
#endif  // else BUG: the tile is read while its TMA load may still be landing.
    for (int j = tid; j < corpus::kBox * corpus::kBox; j += kThreads) acc += tile[s][j];
    ptx::mbarrier_arrive(&empty[s]);
    if (tid == 0 && i + kStages < ntiles) {
      corpus::wait_parity(&empty[s], parity);
      issue(i + kStages);
    }
  }
  out[blockIdx.x * kThreads + tid] = acc;
}
