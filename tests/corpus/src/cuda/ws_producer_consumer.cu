// Warp-specialised ring, the structure of CUTLASS's and Triton's Hopper mainloops: warpgroup
// 0 gives up registers (setmaxnreg.dec) and its warp 0 produces, one elect.sync leader
// issuing expect_tx + the 2-D TMA load per stage; warpgroup 1 takes the registers
// (setmaxnreg.inc) and consumes, each warp's leader arriving on the stage's empty barrier.
// Producer waits start at parity 1 (a fresh barrier's previous phase counts as complete).
// Clean unless built with CORPUS_BUG_PRODUCER_PARITY.
#include "ptx_common.cuh"

constexpr int kStages = 3;
constexpr int kConsumerWarps = 4;

// One CTA per SM (launch bounds' second argument): ptxas needs the register count at entry
// fixed to honour setmaxnreg.
__global__ void __launch_bounds__(256, 1)
ws_ring_sum(const __grid_constant__ CUtensorMap tmap, float* out, int ntiles) {
  __shared__ alignas(128) float tile[kStages][corpus::kBox * corpus::kBox];
  __shared__ uint64_t full[kStages];
  __shared__ uint64_t empty[kStages];
  const int warp = threadIdx.x / 32;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], kConsumerWarps);
    }
    ptx::fence_proxy_async(ptx::space_shared);
  }
  __syncthreads();

  if (warpgroup == 0) {
    ptx::setmaxnreg_dec(ptx::n32_t<40>{});
    if (warp == 0) {
      for (int i = 0; i < ntiles; ++i) {
        const int s = i % kStages;
#if defined(CORPUS_BUG_PRODUCER_PARITY)
        // BUG: waits for the consumers' first release of a stage that was never filled.
        corpus::wait_parity(&empty[s], (i / kStages) & 1);
#else
        corpus::wait_parity(&empty[s], ((i / kStages) & 1) ^ 1);
#endif
        if (corpus::warp_leader()) {
          ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                         &full[s], corpus::tile_bytes());
          const int32_t coords[2] = {0, (static_cast<int32_t>(blockIdx.x) * ntiles + i) * corpus::kBox};
          ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile[s], &tmap,
                                    coords, &full[s]);
        }
        __syncwarp();
      }
    }
  } else {
    ptx::setmaxnreg_inc(ptx::n32_t<232>{});
    const int lane_in_group = threadIdx.x - 128;
    float acc = 0.f;
    for (int i = 0; i < ntiles; ++i) {
      const int s = i % kStages;
      corpus::wait_parity(&full[s], (i / kStages) & 1);
      for (int j = lane_in_group; j < corpus::kBox * corpus::kBox; j += 128) acc += tile[s][j];
      __syncwarp();
      if (corpus::warp_leader()) ptx::mbarrier_arrive(&empty[s]);
    }
    out[blockIdx.x * 128 + lane_in_group] = acc;
  }
}
