// A warp-specialised persistent kernel with CUTLASS's TMA-store epilogue hand-off. Warp 0
// TMA-loads input tiles into a 2-stage ring (full/empty mbarriers); warpgroup 1 consumes a
// tile, hands its stage back, and stages its fp16 result in one shared buffer with
// stmatrix. The hand-off to the async proxy: every writer's fence.proxy.async.shared::cta,
// then a named bar.sync over the 128 consumer threads only (warp 0 never reaches it), then
// one elected thread of warp 4 issues the 2-D TMA store and commits its bulk group. Before the
// buffer is written again that thread waits for the store to have read it
// (cp.async.bulk.wait_group.read 0) and the same named barrier passes that on.
// Clean unless built with one of the CORPUS_BUG_* macros below.
#include "ptx_common.cuh"
#include "wgmma_common.cuh"

#include <cuda_fp16.h>

namespace {

constexpr int kStages = 2;
constexpr int kThreads = 256;
constexpr int kConsumerWarps = 4;
constexpr uint32_t kEpilogueBar = 1;          // named barrier id of the consumer warpgroup
#if defined(CORPUS_BUG_BAR_COUNT)
// BUG: the whole CTA's count, but only warpgroup 1 reaches the barrier: it never completes.
constexpr uint32_t kEpilogueThreads = kThreads;
#else
constexpr uint32_t kEpilogueThreads = 128;
#endif

__host__ __device__ constexpr uint32_t consumer_warps() { return kConsumerWarps; }

// Four 8x8 b16 matrices per warp: warp w's rows 8w..8w+7 of the 32x32 fp16 tile (64-byte
// rows), lane l addressing row l % 8 of the matrix l / 8 (columns 8 (l / 8) onwards).
__device__ inline __half* stmatrix_row(__half* staging, int warp, int lane) {
  return staging + (8 * warp + lane % 8) * corpus::kBox + 8 * (lane / 8);
}

}  // namespace

__global__ void __launch_bounds__(kThreads, 1)
tma_store_epilogue(const __grid_constant__ CUtensorMap tmap_in,
                   const __grid_constant__ CUtensorMap tmap_out, int ntiles) {
  __shared__ alignas(128) float tile[kStages][corpus::kBox * corpus::kBox];
  __shared__ alignas(128) __half staging[corpus::kBox * corpus::kBox];
  __shared__ uint64_t full[kStages];
  __shared__ uint64_t empty[kStages];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], consumer_warps());
    }
    ptx::fence_proxy_async(ptx::space_shared);
  }
  __syncthreads();

  const int first = blockIdx.x * ntiles;
  if (threadIdx.x / 128 == 0) {
    if (warp == 0 && corpus::warp_leader()) {
      for (int i = 0; i < ntiles; ++i) {
        const int s = i % kStages;
        corpus::wait_parity(&empty[s], ((i / kStages) & 1) ^ 1);
        ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                       &full[s], corpus::tile_bytes());
        const int32_t coords[2] = {0, (first + i) * corpus::kBox};
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile[s], &tmap_in,
                                  coords, &full[s]);
      }
    }
    return;
  }

  const int cw = warp - 4;                     // consumer warp 0..3
#if defined(CORPUS_ELECT_IN_STORER_WARP)
  // CUTLASS's spelling (`warp_idx == 0 && elect_one_sync()`): only warp 4 runs elect.sync, so
  // nvcc writes the flag twice (false, then the election under the branch).
  const bool storer = cw == 0 && corpus::warp_leader();
#else
  // Every consumer warp elects (elect.sync is .sync.aligned: no branch around it); warp 4's
  // leader stores.
  const bool storer = (cw == 0) & corpus::warp_leader();
#endif
  for (int i = 0; i < ntiles; ++i) {
    const int s = i % kStages;
    corpus::wait_parity(&full[s], (i / kStages) & 1);
    // Each lane's 8 values: its row (8 cw + lane % 8), columns 8 (lane / 8) onwards.
    const float* src = &tile[s][(8 * cw + lane % 8) * corpus::kBox + 8 * (lane / 8)];
    float v[8];
    for (int e = 0; e < 8; ++e) v[e] = src[e] * src[e];
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(&empty[s]);

#if !defined(CORPUS_BUG_NO_WAIT_READ)
    // The previous tile's store must have read the staging buffer before anyone rewrites it.
    if (storer) ptx::cp_async_bulk_wait_group_read(ptx::n32_t<0>{});
#endif  // else BUG: stmatrix below overwrites the buffer the last TMA store may still read.
    corpus::named_bar_sync(kEpilogueBar, kEpilogueThreads);
    const uint32_t packed[4] = {corpus::pack_f16x2(v[0], v[1]), corpus::pack_f16x2(v[2], v[3]),
                                corpus::pack_f16x2(v[4], v[5]), corpus::pack_f16x2(v[6], v[7])};
    ptx::stmatrix_m8n8(stmatrix_row(staging, cw, lane), packed);
#if !defined(CORPUS_BUG_NO_PROXY_FENCE)
    ptx::fence_proxy_async(ptx::space_shared);
#endif  // else BUG: the TMA store (async proxy) may read the buffer from before stmatrix.
    corpus::named_bar_sync(kEpilogueBar, kEpilogueThreads);
    if (storer) {
      const int32_t coords[2] = {0, (first + i) * corpus::kBox};
      ptx::cp_async_bulk_tensor(ptx::space_global, ptx::space_shared, &tmap_out, coords,
                                staging);
      ptx::cp_async_bulk_commit_group();
    }
  }
  if (storer) ptx::cp_async_bulk_wait_group_read(ptx::n32_t<0>{});
}
