// A 2-stage TMA ring shared by a 2-CTA cluster, the shape of CUTLASS's multicast mainloops:
// CTA rank 0's thread 0 produces, multicasting each tile into both CTAs (ctaMask 0b11) where
// it completes on each CTA's own full barrier; each CTA's consumers wait on their full
// barrier, and once the whole CTA has read the stage its thread 0 releases it with a remote
// arrive (mbarrier.arrive.release.cluster.shared::cluster) on rank 0's empty barrier, which
// therefore expects 2 arrivals a phase. Clean unless built with CORPUS_BUG_EMPTY_COUNT.
#include <cooperative_groups.h>
#include "ptx_common.cuh"

constexpr int kStages = 2;
constexpr int kThreads = 128;
constexpr int kCtas = 2;

__global__ void __cluster_dims__(kCtas, 1, 1) __launch_bounds__(kThreads)
cluster_ring_sum(const __grid_constant__ CUtensorMap tmap, float* out, int ntiles) {
  namespace cg = cooperative_groups;
  __shared__ alignas(128) float tile[kStages][corpus::kBox * corpus::kBox];
  __shared__ uint64_t full[kStages];
  __shared__ uint64_t empty[kStages];   // used in rank 0 only
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t rank = cluster.block_rank();

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
#if defined(CORPUS_BUG_EMPTY_COUNT)
      // BUG: counts only this CTA's release; rank 1's arrive completes a phase early.
      ptx::mbarrier_init(&empty[s], 1);
#else
      ptx::mbarrier_init(&empty[s], kCtas);
#endif
    }
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  ptx::barrier_cluster_arrive(ptx::sem_release);
  ptx::barrier_cluster_wait(ptx::sem_acquire);

  float acc = 0.f;
  for (int i = 0; i < ntiles; ++i) {
    const int s = i % kStages;
    const uint32_t parity = (i / kStages) & 1;
    if (threadIdx.x == 0) {
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                     &full[s], corpus::tile_bytes());
      if (rank == 0) {
        corpus::wait_parity(&empty[s], parity ^ 1);
        const int32_t coords[2] = {0, (static_cast<int32_t>(blockIdx.x / kCtas) * ntiles + i) *
                                          corpus::kBox};
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile[s], &tmap,
                                  coords, &full[s], static_cast<uint16_t>(0b11));
      }
    }
    corpus::wait_parity(&full[s], parity);
    for (int j = threadIdx.x; j < corpus::kBox * corpus::kBox; j += kThreads) acc += tile[s][j];
    __syncthreads();
    if (threadIdx.x == 0) {
      ptx::mbarrier_arrive(ptx::sem_release, ptx::scope_cluster, ptx::space_cluster,
                           cluster.map_shared_rank(&empty[s], 0));
    }
  }
  out[blockIdx.x * kThreads + threadIdx.x] = acc;

  // Rank 1 arrives on rank 0's barriers and rank 0's multicasts write rank 1's tiles:
  // neither CTA leaves before the other is done.
  ptx::barrier_cluster_arrive(ptx::sem_release);
  ptx::barrier_cluster_wait(ptx::sem_acquire);
}
