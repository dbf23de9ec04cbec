// A 2-D TMA store of a tile that every thread wrote with st.shared: fence.proxy.async makes
// the generic-proxy writes visible to the async proxy, a CTA barrier orders all threads'
// writes before thread 0's store, and the bulk group is waited (.read) before the CTA exits
// and its shared memory is reused. Clean unless built with CORPUS_BUG_NO_PROXY_FENCE.
#include "ptx_common.cuh"

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads)
tma_store_iota(const __grid_constant__ CUtensorMap tmap, float scale) {
  __shared__ alignas(128) float tile[corpus::kBox * corpus::kBox];

  for (int j = threadIdx.x; j < corpus::kBox * corpus::kBox; j += kThreads) {
    tile[j] = scale * static_cast<float>(blockIdx.x * corpus::kBox * corpus::kBox + j);
  }
#if !defined(CORPUS_BUG_NO_PROXY_FENCE)
  ptx::fence_proxy_async(ptx::space_shared);
#endif  // else BUG: the TMA store may read shared memory from before these writes.
  __syncthreads();

  if (threadIdx.x == 0) {
    const int32_t coords[2] = {0, static_cast<int32_t>(blockIdx.x) * corpus::kBox};
    ptx::cp_async_bulk_tensor(ptx::space_global, ptx::space_shared, &tmap, coords, tile);
    ptx::cp_async_bulk_commit_group();
    ptx::cp_async_bulk_wait_group_read(ptx::n32_t<0>{});
  }
}
