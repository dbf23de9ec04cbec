// TMA multicast in a 2-CTA cluster: each CTA initialises its own barrier and announces the
// tile's bytes on it; CTA rank 0 issues one 2-D load multicast to both CTAs (ctaMask 0b11),
// which lands at the same shared offset and completes on the same barrier offset in each.
// The barriers' init is published cluster-wide (fence.mbarrier_init + cluster barrier)
// before the peer's TMA may signal them. Clean unless built with CORPUS_BUG_INIT_UNSYNCED.
#include "ptx_common.cuh"

constexpr int kThreads = 128;

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
cluster_multicast_sum(const __grid_constant__ CUtensorMap tmap, float* out) {
  __shared__ alignas(128) float tile[corpus::kBox * corpus::kBox];
  __shared__ uint64_t bar;
  const uint32_t rank = ptx::get_sreg_cluster_ctarank();

  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
#if !defined(CORPUS_BUG_INIT_UNSYNCED)
  ptx::barrier_cluster_arrive(ptx::sem_release);
  ptx::barrier_cluster_wait(ptx::sem_acquire);
#endif  // else BUG: rank 0's multicast may signal rank 1's barrier before it is initialised.

  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &bar,
                                   corpus::tile_bytes());
    if (rank == 0) {
      const int32_t coords[2] = {0, static_cast<int32_t>(blockIdx.x / 2) * corpus::kBox};
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile, &tmap, coords,
                                &bar, static_cast<uint16_t>(0b11));
    }
  }
  corpus::wait_parity(&bar, 0);

  float acc = 0.f;
  for (int j = threadIdx.x; j < corpus::kBox * corpus::kBox; j += kThreads) acc += tile[j];
  out[blockIdx.x * kThreads + threadIdx.x] = acc;

  // Rank 0's multicast writes into rank 1's shared memory: neither CTA leaves before both
  // copies have landed.
  ptx::barrier_cluster_arrive(ptx::sem_release);
  ptx::barrier_cluster_wait(ptx::sem_acquire);
}
