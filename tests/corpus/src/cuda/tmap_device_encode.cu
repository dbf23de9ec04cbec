// Tensor maps encoded on the device, the flow Triton's device-side descriptors and CUTLASS's
// grouped GEMM use. Clean unless built with a CORPUS_BUG_* macro.
//  - tmap_encode_smem_publish: warp 0 copies a template map into shared memory, rewrites its
//    address and extent with tensormap.replace, and publishes it to a global workspace with
//    tensormap.cp_fenceproxy (release, gpu); thread 0 acquires it before the TMA load.
//  - tmap_encode_global: thread 0 copies the template into its global workspace slot and
//    rewrites it there with tensormap.replace (every byte of the map is written by this thread,
//    on this device), releases the generic-proxy writes to the tensormap proxy and acquires
//    them before the load.
#include "ptx_common.cuh"

constexpr int kThreads = 128;

__device__ float sum_tile(const float* tile) {
  float acc = 0.f;
  for (int j = threadIdx.x; j < corpus::kBox * corpus::kBox; j += kThreads) acc += tile[j];
  return acc;
}

// Load tile (0, row) through the map at `gmap` (already acquired by thread 0) and reduce it.
__device__ float load_and_sum(const CUtensorMap* gmap, int row, float* tile, uint64_t* bar) {
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(bar, 1);
    ptx::fence_proxy_async(ptx::space_shared);
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bar,
                                   corpus::tile_bytes());
    const int32_t coords[2] = {0, row};
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile, gmap, coords, bar);
  }
  __syncthreads();
  corpus::wait_parity(bar, 0);
  return sum_tile(tile);
}

__global__ void __launch_bounds__(kThreads)
tmap_encode_smem_publish(const __grid_constant__ CUtensorMap tmpl, CUtensorMap* workspace,
                         const float* const* bases, const int* rows, float* out) {
  __shared__ alignas(128) CUtensorMap smap;
  __shared__ alignas(128) float tile[corpus::kBox * corpus::kBox];
  __shared__ uint64_t bar;
  CUtensorMap* gmap = &workspace[blockIdx.x];

  if (threadIdx.x < 32) {
    // 128 bytes, 4 per lane.
    reinterpret_cast<uint32_t*>(&smap)[threadIdx.x] =
        reinterpret_cast<const uint32_t*>(&tmpl)[threadIdx.x];
    __syncwarp();
    if (threadIdx.x == 0) {
      ptx::tensormap_replace_global_address(ptx::space_shared, &smap, bases[blockIdx.x]);
      ptx::tensormap_replace_global_dim(ptx::space_shared, &smap, ptx::n32_t<1>{},
                                        rows[blockIdx.x]);
    }
    // cp_fenceproxy is .sync.aligned: the whole warp runs it, after the replaces.
    __syncwarp();
    ptx::tensormap_cp_fenceproxy(ptx::sem_release, ptx::scope_gpu, gmap, &smap);
  }
#if !defined(CORPUS_BUG_NO_ACQUIRE)
  if (threadIdx.x == 0) {
    ptx::fence_proxy_tensormap_generic(ptx::sem_acquire, ptx::scope_gpu, gmap);
  }
#endif  // else BUG: the TMA may read a stale copy of the map from the tensormap proxy.
  const float acc = load_and_sum(gmap, 0, tile, &bar);
  out[blockIdx.x * kThreads + threadIdx.x] = acc;
}

__global__ void __launch_bounds__(kThreads)
tmap_encode_global(const __grid_constant__ CUtensorMap tmpl, CUtensorMap* workspace,
                   const float* const* bases, const int* rows, float* out) {
  __shared__ alignas(128) float tile[corpus::kBox * corpus::kBox];
  __shared__ uint64_t bar;
  CUtensorMap* gmap = &workspace[blockIdx.x];

  if (threadIdx.x == 0) {
    for (int j = 0; j < 16; ++j) {
      reinterpret_cast<uint64_t*>(gmap)[j] = reinterpret_cast<const uint64_t*>(&tmpl)[j];
    }
    ptx::tensormap_replace_global_address(ptx::space_global, gmap, bases[blockIdx.x]);
    ptx::tensormap_replace_global_dim(ptx::space_global, gmap, ptx::n32_t<1>{},
                                      rows[blockIdx.x]);
    ptx::tensormap_replace_box_dim(ptx::space_global, gmap, ptx::n32_t<0>{}, corpus::kBox);
    ptx::tensormap_replace_box_dim(ptx::space_global, gmap, ptx::n32_t<1>{}, corpus::kBox);
#if !defined(CORPUS_BUG_NO_RELEASE)
    ptx::fence_proxy_tensormap_generic(ptx::sem_release, ptx::scope_gpu);
#endif  // else BUG: the acquire alone does not order this thread's replace writes.
    ptx::fence_proxy_tensormap_generic(ptx::sem_acquire, ptx::scope_gpu, gmap);
  }
  const float acc = load_and_sum(gmap, 0, tile, &bar);
  out[blockIdx.x * kThreads + threadIdx.x] = acc;
}
