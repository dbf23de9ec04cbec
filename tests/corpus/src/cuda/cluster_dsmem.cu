// Distributed shared memory in a 2-CTA cluster: each CTA fills its buffer, the cluster
// barrier (arrive.release / wait.acquire) publishes it, each CTA reads its peer's buffer
// through mapa, and a second cluster barrier keeps every buffer alive until the peer has
// read it. Clean unless built with CORPUS_BUG_NO_FINAL_SYNC.
#include <cooperative_groups.h>
#include "ptx_common.cuh"

constexpr int kThreads = 128;

__device__ uint32_t peer_addr(const void* local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(local))), "r"(rank));
  return remote;
}

__device__ float ld_cluster(uint32_t addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
cluster_exchange(const float* in, float* out) {
  __shared__ float mine[kThreads];
  const uint32_t rank = ptx::get_sreg_cluster_ctarank();
  const int g = blockIdx.x * kThreads + threadIdx.x;

  mine[threadIdx.x] = in[g] * 2.f;
  ptx::barrier_cluster_arrive(ptx::sem_release);
  ptx::barrier_cluster_wait(ptx::sem_acquire);

  const float theirs = ld_cluster(peer_addr(&mine[threadIdx.x], rank ^ 1));
  out[g] = mine[threadIdx.x] + theirs;

#if !defined(CORPUS_BUG_NO_FINAL_SYNC)
  ptx::barrier_cluster_arrive(ptx::sem_release);
  ptx::barrier_cluster_wait(ptx::sem_acquire);
#endif  // else BUG: a CTA may exit while its peer still reads its buffer.
}

// The same exchange written with cooperative_groups, the way most CUDA code spells it.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
cluster_exchange_cg(const float* in, float* out) {
  namespace cg = cooperative_groups;
  __shared__ float mine[kThreads];
  cg::cluster_group cluster = cg::this_cluster();
  const int g = blockIdx.x * kThreads + threadIdx.x;

  mine[threadIdx.x] = in[g] + 1.f;
  cluster.sync();
  const float* theirs = cluster.map_shared_rank(mine, cluster.block_rank() ^ 1);
  out[g] = mine[threadIdx.x] * theirs[threadIdx.x];
  cluster.sync();
}
