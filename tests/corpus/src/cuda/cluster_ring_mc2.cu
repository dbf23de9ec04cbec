// cluster_ring.cu's 2-CTA ring with both GEMM operands multicast, as CUTLASS's 2x1 / 1x2
// cluster mainloops do: each stage holds a 64x64 fp16 A tile and B tile, 128B-swizzled
// (1024-byte aligned, the descriptors' swizzle mode 1). Rank 0's thread 0 multicasts A into
// both CTAs and rank 1's multicasts B (ctaMask 0b11), each completing on every CTA's own full
// barrier, which therefore expects both tiles' bytes. Since both producers write both CTAs,
// a stage is free only once both CTAs have read it: every consumer warp releases it on the
// empty barrier of each CTA (mapa + mbarrier.arrive.release.cluster.shared::cluster), which
// expects 2 CTAs x 4 warps. The consumers read the stage with an SS wgmma.
// Clean unless built with CORPUS_BUG_RELEASE_OWN_CTA.
#include <cooperative_groups.h>
#include "ptx_common.cuh"
#include "wgmma_common.cuh"

namespace {

constexpr int kStages = 2;
constexpr int kThreads = 128;
constexpr int kCtas = 2;
constexpr uint32_t kTileBytes = 64 * 64 * 2;

__host__ __device__ constexpr uint32_t stage_bytes() { return 2 * kTileBytes; }
__host__ __device__ constexpr uint32_t releases() { return kCtas * kThreads / 32; }

}  // namespace

__global__ void __cluster_dims__(kCtas, 1, 1) __launch_bounds__(kThreads)
cluster_ring_mc2(const __grid_constant__ CUtensorMap tmap_a,
                 const __grid_constant__ CUtensorMap tmap_b, float* out, int nk) {
  namespace cg = cooperative_groups;
  __shared__ alignas(1024) uint8_t a_tile[kStages][kTileBytes];
  __shared__ alignas(1024) uint8_t b_tile[kStages][kTileBytes];
  __shared__ uint64_t full[kStages];
  __shared__ uint64_t empty[kStages];
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t rank = cluster.block_rank();
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], releases());
    }
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  ptx::barrier_cluster_arrive(ptx::sem_release);
  ptx::barrier_cluster_wait(ptx::sem_acquire);

  const int32_t tile_m = static_cast<int32_t>(blockIdx.x / kCtas) * 64;
  float acc[8] = {};
  for (int kb = 0; kb < nk; ++kb) {
    const int s = kb % kStages;
    const uint32_t parity = (kb / kStages) & 1;
    if (threadIdx.x == 0) {
      corpus::wait_parity(&empty[s], parity ^ 1);
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                     &full[s], stage_bytes());
      const int32_t coords[2] = {kb * 64, tile_m};
      if (rank == 0) {
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, a_tile[s], &tmap_a,
                                  coords, &full[s], static_cast<uint16_t>(0b11));
      } else {
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, b_tile[s], &tmap_b,
                                  coords, &full[s], static_cast<uint16_t>(0b11));
      }
    }
    corpus::wait_parity(&full[s], parity);
    corpus::fence_operands(acc);
    corpus::wgmma_fence();
    for (int kk = 0; kk < 4; ++kk) {
      corpus::wgmma_m64n16k16_ss(acc, corpus::smem_desc_sw128(a_tile[s]) + 2 * kk,
                                 corpus::smem_desc_sw128(b_tile[s]) + 2 * kk, 1);
    }
    corpus::wgmma_commit();
    corpus::wgmma_wait<0>();
    corpus::fence_operands(acc);
    if (lane == 0) {
#if defined(CORPUS_BUG_RELEASE_OWN_CTA)
      // BUG: only this CTA's producer hears of the release, but the other CTA's producer
      // also multicasts into this stage (and each empty barrier waits for 8 arrivals a phase).
      ptx::mbarrier_arrive(ptx::sem_release, ptx::scope_cluster, ptx::space_cluster,
                           cluster.map_shared_rank(&empty[s], rank));
#else
      for (uint32_t dst = 0; dst < kCtas; ++dst) {
        ptx::mbarrier_arrive(ptx::sem_release, ptx::scope_cluster, ptx::space_cluster,
                             cluster.map_shared_rank(&empty[s], dst));
      }
#endif
    }
  }
  for (int r = 0; r < 8; ++r) out[(blockIdx.x * kThreads + threadIdx.x) * 8 + r] = acc[r];

  // Each CTA's multicasts write the other's tiles and its releases arrive on the other's
  // barriers: neither leaves before the other is done.
  ptx::barrier_cluster_arrive(ptx::sem_release);
  ptx::barrier_cluster_wait(ptx::sem_acquire);
}
