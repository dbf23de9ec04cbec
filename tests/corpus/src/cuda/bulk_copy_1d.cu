// 1-D bulk copies both ways: cp.async.bulk global -> shared completing on an mbarrier, a
// scale in shared memory by every thread (st.shared), fence.proxy.async + CTA barrier, then
// cp.async.bulk shared -> global in a bulk group that is waited before exit. Clean unless
// built with a CORPUS_BUG_* macro.
#include "ptx_common.cuh"

constexpr int kThreads = 256;
constexpr int kElems = 2048;  // 8 KiB per CTA

__host__ __device__ constexpr uint32_t chunk_bytes() { return kElems * sizeof(float); }

__global__ void __launch_bounds__(kThreads)
bulk_scale(const float* in, float* out, float alpha) {
  __shared__ alignas(128) float buf[kElems];
  __shared__ uint64_t bar;
  const size_t base = static_cast<size_t>(blockIdx.x) * kElems;

  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_proxy_async(ptx::space_shared);
#if defined(CORPUS_BUG_EXPECT_TX)
    // BUG: announces half the bytes the copy delivers (an element-size slip).
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &bar,
                                   chunk_bytes() / 2);
#else
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &bar,
                                   chunk_bytes());
#endif
    ptx::cp_async_bulk(ptx::space_shared, ptx::space_global, buf, in + base, chunk_bytes(),
                       &bar);
  }
  __syncthreads();
  corpus::wait_parity(&bar, 0);

  for (int j = threadIdx.x; j < kElems; j += kThreads) buf[j] *= alpha;
  // Generic-proxy writes must be made visible to the async proxy before the bulk store.
#if !defined(CORPUS_BUG_NO_PROXY_FENCE)
  ptx::fence_proxy_async(ptx::space_shared);
#endif  // else BUG: the bulk store may read the data from before the scale.
  __syncthreads();

  if (threadIdx.x == 0) {
    ptx::cp_async_bulk(ptx::space_global, ptx::space_shared, out + base, buf, chunk_bytes());
    ptx::cp_async_bulk_commit_group();
    ptx::cp_async_bulk_wait_group_read(ptx::n32_t<0>{});
  }
}
