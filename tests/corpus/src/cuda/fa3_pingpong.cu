// FlashAttention-3's layout and schedule, reduced: 384 threads, warpgroup 0's warp 0 produces
// (one elected lane), warpgroups 1 and 2 consume, each its own 64-row Q tile against the same
// K and V blocks. Q, K and V rings and all their mbarriers (full/empty per stage) are carved
// out of ONE dynamic shared buffer at computed offsets, as FA3's SharedStorage does. The two
// consumers ping-pong through named barriers: warpgroup wg syncs on barrier wg before its
// QK^T and arrives on the other's barrier after issuing it, both with 256 threads, and
// warpgroup 2 pre-arrives on barrier 1 so that warpgroup 1 goes first. S = Q K^T is an SS
// wgmma on 128B-swizzled tiles; O += P V an RS wgmma with P in registers.
// Clean unless built with one of the CORPUS_BUG_* macros below.
#include "ptx_common.cuh"
#include "wgmma_common.cuh"

#include <cuda_fp16.h>

namespace {

constexpr int kStages = 2;
constexpr int kConsumers = 2;                 // warpgroups 1 and 2
constexpr int kD = 64;                        // head dim: one 128-byte swizzled row in fp16
constexpr int kBlockN = 16;                   // keys per K/V block
constexpr uint32_t kQBytes = 64 * kD * 2;     // a 64-row Q tile
constexpr uint32_t kKVBytes = kBlockN * kD * 2;

// Offsets into the dynamic buffer; tiles first, each 1024-aligned for the 128B swizzle.
constexpr uint32_t kQOff = 0;
constexpr uint32_t kKOff = kQOff + kConsumers * kQBytes;
constexpr uint32_t kVOff = kKOff + kStages * kKVBytes;
constexpr uint32_t kBarOff = kVOff + kStages * kKVBytes;
constexpr uint32_t kQFull = kBarOff;
constexpr uint32_t kKFull = kQFull + 8 * kConsumers;
constexpr uint32_t kKEmpty = kKFull + 8 * kStages;
constexpr uint32_t kVFull = kKEmpty + 8 * kStages;
constexpr uint32_t kVEmpty = kVFull + 8 * kStages;
constexpr uint32_t kSmemBytes = kVEmpty + 8 * kStages;
// Functions, not variables: cuda::ptx takes counts by const reference (see ptx_common.cuh).
__host__ __device__ constexpr uint32_t q_bytes() { return kQBytes; }
__host__ __device__ constexpr uint32_t kv_bytes() { return kKVBytes; }
// Every consumer warp hands a stage back once.
__host__ __device__ constexpr uint32_t releases() { return kConsumers * 4; }

__device__ inline uint64_t* bar(uint8_t* smem, uint32_t off, int i) {
  return reinterpret_cast<uint64_t*>(smem + off) + i;
}

}  // namespace

__global__ void __launch_bounds__(384, 1)
fa3_pingpong(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
             const __grid_constant__ CUtensorMap tmap_v, float* out, int nblocks) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const int warpgroup = threadIdx.x / 128;
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int c = 0; c < kConsumers; ++c) ptx::mbarrier_init(bar(smem, kQFull, c), 1);
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(bar(smem, kKFull, s), 1);
      ptx::mbarrier_init(bar(smem, kKEmpty, s), releases());
      ptx::mbarrier_init(bar(smem, kVFull, s), 1);
      ptx::mbarrier_init(bar(smem, kVEmpty, s), releases());
    }
    ptx::fence_proxy_async(ptx::space_shared);
  }
  __syncthreads();

  if (warpgroup == 0) {
    ptx::setmaxnreg_dec(ptx::n32_t<24>{});
    if (threadIdx.x / 32 == 0 && corpus::warp_leader()) {
      const int32_t head = static_cast<int32_t>(blockIdx.x);
      for (int c = 0; c < kConsumers; ++c) {
        ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                       bar(smem, kQFull, c), q_bytes());
        const int32_t qc[3] = {0, c * 64, head};
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global,
                                  smem + kQOff + c * kQBytes, &tmap_q, qc, bar(smem, kQFull, c));
      }
      for (int j = 0; j < nblocks; ++j) {
        const int s = j % kStages;
        const uint32_t phase = (j / kStages) & 1;
        const int32_t kc[3] = {0, j * kBlockN, head};
        corpus::wait_parity(bar(smem, kKEmpty, s), phase ^ 1);
        ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                       bar(smem, kKFull, s), kv_bytes());
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global,
                                  smem + kKOff + s * kKVBytes, &tmap_k, kc, bar(smem, kKFull, s));
        corpus::wait_parity(bar(smem, kVEmpty, s), phase ^ 1);
        ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                       bar(smem, kVFull, s), kv_bytes());
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global,
                                  smem + kVOff + s * kKVBytes, &tmap_v, kc, bar(smem, kVFull, s));
      }
    }
    return;
  }

  ptx::setmaxnreg_inc(ptx::n32_t<240>{});
  const int cw = warpgroup - 1;
  const uint32_t mine = warpgroup;              // named barrier ids 1 and 2
  const uint32_t other = 3 - warpgroup;
  const uint8_t* q = smem + kQOff + cw * kQBytes;
  float o[32] = {};
  corpus::wait_parity(bar(smem, kQFull, cw), 0);
#if defined(CORPUS_BUG_BOTH_PREARRIVE)
  // BUG: warpgroup 1 pre-arrives too: barrier 1's first phase completes with nobody in it,
  // and from then on the two warpgroups' GEMMs are no longer ordered.
  corpus::named_bar_arrive(1, 256);
#else
  if (warpgroup == 2) corpus::named_bar_arrive(1, 256);   // warpgroup 1 goes first
#endif
  for (int j = 0; j < nblocks; ++j) {
    const int s = j % kStages;
    const uint32_t phase = (j / kStages) & 1;
    const uint8_t* k = smem + kKOff + s * kKVBytes;
    const uint8_t* v = smem + kVOff + s * kKVBytes;

    float sc[8] = {};
    corpus::wait_parity(bar(smem, kKFull, s), phase);
    corpus::named_bar_sync(mine, 256);
    corpus::fence_operands(sc);
    corpus::wgmma_fence();
    for (int kk = 0; kk < kD / 16; ++kk) {
      // k16 of fp16 is 32 bytes along the swizzled row: the descriptors step by 2 units.
      corpus::wgmma_m64n16k16_ss(sc, corpus::smem_desc_sw128(q) + 2 * kk,
                                 corpus::smem_desc_sw128(k) + 2 * kk, kk);
    }
    corpus::wgmma_commit();
    corpus::named_bar_arrive(other, 256);
#if defined(CORPUS_BUG_K_RELEASED_EARLY)
    // BUG: the K stage goes back to the producer while the QK^T wgmmas may still read it.
    if (lane == 0) ptx::mbarrier_arrive(bar(smem, kKEmpty, s));
    corpus::wgmma_wait<0>();
#else
    corpus::wgmma_wait<0>();
    if (lane == 0) ptx::mbarrier_arrive(bar(smem, kKEmpty, s));
#endif
    corpus::fence_operands(sc);

    uint32_t p[4];
    for (int r = 0; r < 4; ++r) p[r] = corpus::pack_f16x2(__expf(sc[2 * r]), __expf(sc[2 * r + 1]));
#if !defined(CORPUS_BUG_NO_V_WAIT)
    corpus::wait_parity(bar(smem, kVFull, s), phase);
#endif  // else BUG: P V reads the V stage while its TMA load may still be landing.
    corpus::fence_operands(o);
    corpus::wgmma_fence();
    corpus::wgmma_m64n64k16_rs(o, p, corpus::smem_desc_sw128(v), 1);
    corpus::wgmma_commit();
    corpus::wgmma_wait<0>();
    corpus::fence_operands(o);
    if (lane == 0) ptx::mbarrier_arrive(bar(smem, kVEmpty, s));
  }
  float* dst = out + (blockIdx.x * kConsumers * 128 + (threadIdx.x - 128)) * 32;
  for (int r = 0; r < 32; ++r) dst[r] = o[r];
}

// The launch's dynamic shared memory size, for a host that would run it.
__host__ __device__ constexpr uint32_t fa3_pingpong_smem_bytes() { return kSmemBytes; }
