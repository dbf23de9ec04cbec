// A W8A16-style mainloop: operand A is made in registers (int8 weights from global memory,
// dequantised) and staged into shared memory with st.shared in the 128B-swizzled K-major
// layout a wgmma descriptor reads; operand B arrives by 2-D TMA in a 2-stage ring. The
// generic-proxy writes of A reach the wgmma (async proxy) through every writer's
// fence.proxy.async.shared::cta, then a CTA barrier, then wgmma.fence. One warpgroup.
// Clean unless built with CORPUS_BUG_NO_PROXY_FENCE.
#include "ptx_common.cuh"
#include "wgmma_common.cuh"

namespace {

constexpr int kStages = 2;
constexpr int kThreads = 128;
constexpr int kK = 64;                         // K per block: one 128-byte swizzled fp16 row
constexpr int kN = 16;
constexpr uint32_t kBBytes = kN * kK * 2;

__host__ __device__ constexpr uint32_t b_bytes() { return kBBytes; }

// Thread t writes half of row t / 2 of the 64 x 64 fp16 A tile: 4 of the row's 16-byte
// chunks, each at its 128B-swizzled place (chunk ^ (row % 8)).
__device__ inline void stage_a(uint8_t* a_tile, const int8_t* w, float scale, int kb) {
  const int row = threadIdx.x / 2;
  const int8_t* src = w + (static_cast<size_t>(row) * 1024 + kb * kK) + (threadIdx.x % 2) * 32;
  for (int c = 0; c < 4; ++c) {
    const int chunk = (threadIdx.x % 2) * 4 + c;
    uint32_t h[4];
    for (int e = 0; e < 4; ++e) {
      h[e] = corpus::pack_f16x2(scale * src[8 * c + 2 * e], scale * src[8 * c + 2 * e + 1]);
    }
    *reinterpret_cast<uint4*>(a_tile + row * 128 + ((chunk ^ (row % 8)) * 16)) =
        make_uint4(h[0], h[1], h[2], h[3]);
  }
}

}  // namespace

__global__ void __launch_bounds__(kThreads, 1)
wgmma_staged_a(const __grid_constant__ CUtensorMap tmap_b, const int8_t* w, float scale,
               float* out, int nk) {
  __shared__ alignas(1024) uint8_t a_tile[64 * kK * 2];
  __shared__ alignas(1024) uint8_t b_tile[kStages][kBBytes];
  __shared__ uint64_t full[kStages];

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) ptx::mbarrier_init(&full[s], 1);
    ptx::fence_proxy_async(ptx::space_shared);
  }
  __syncthreads();

  auto issue = [&](int kb) {
    const int s = kb % kStages;
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                   &full[s], b_bytes());
    const int32_t coords[2] = {kb * kK, static_cast<int32_t>(blockIdx.x) * kN};
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, b_tile[s], &tmap_b,
                              coords, &full[s]);
  };
  if (threadIdx.x == 0) {
    for (int kb = 0; kb < kStages && kb < nk; ++kb) issue(kb);
  }

  float acc[8] = {};
  for (int kb = 0; kb < nk; ++kb) {
    const int s = kb % kStages;
    stage_a(a_tile, w, scale, kb);
#if !defined(CORPUS_BUG_NO_PROXY_FENCE)
    ptx::fence_proxy_async(ptx::space_shared);
#endif  // else BUG: the wgmma (async proxy) may read A from before this thread's st.shared.
    __syncthreads();
    corpus::wait_parity(&full[s], (kb / kStages) & 1);
    corpus::fence_operands(acc);
    corpus::wgmma_fence();
    for (int kk = 0; kk < kK / 16; ++kk) {
      corpus::wgmma_m64n16k16_ss(acc, corpus::smem_desc_sw128(a_tile) + 2 * kk,
                                 corpus::smem_desc_sw128(b_tile[s]) + 2 * kk, 1);
    }
    corpus::wgmma_commit();
    corpus::wgmma_wait<0>();
    corpus::fence_operands(acc);
    // Every warp's wgmma has read A and this B stage before A is restaged and B refilled.
    __syncthreads();
    if (threadIdx.x == 0 && kb + kStages < nk) issue(kb + kStages);
  }
  for (int r = 0; r < 8; ++r) out[(blockIdx.x * kThreads + threadIdx.x) * 8 + r] = acc[r];
}
