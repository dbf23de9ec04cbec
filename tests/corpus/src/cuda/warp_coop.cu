// Wave 3: everyday warp- and grid-level CUDA: shuffles, votes, __match_any_sync,
// __reduce_add_sync (redux.sync), half2 / bfloat162 arithmetic, and a cooperative_groups
// grid.sync() (built with -rdc=true, the grid barrier's runtime needs relocatable code).
// Clean.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cg = cooperative_groups;

__global__ void __launch_bounds__(256, 2)
warp_intrinsics(const int* keys, const float* vals, int* out, float* out_f, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int key = i < n ? keys[i] : -1;
  float v = i < n ? vals[i] : 0.f;
  const unsigned active = __ballot_sync(0xffffffffu, i < n);
  const unsigned peers = __match_any_sync(0xffffffffu, key);
  for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xffffffffu, v, d);
  const unsigned sum = __reduce_add_sync(0xffffffffu, static_cast<unsigned>(key));
  const int maxk = __reduce_max_sync(0xffffffffu, key);
  const int leader = __ffs(peers) - 1;
  const float from_leader = __shfl_sync(0xffffffffu, v, leader);
  if (i < n) {
    out[i] = __popc(active) + __popc(peers) + static_cast<int>(sum) + maxk +
             (__any_sync(0xffffffffu, key < 0) ? 1 : 0) + (__all_sync(0xffffffffu, key > 0));
    out_f[i] = from_leader;
  }
}

__global__ void half_math(const __half2* a, const __half2* b, __half2* c,
                          const __nv_bfloat162* x, const __nv_bfloat162* y,
                          __nv_bfloat162* z, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const __half2 h = __hfma2(a[i], b[i], __hmul2(a[i], a[i]));
  c[i] = __hmax2(h, __float2half2_rn(0.f));
  const __nv_bfloat162 g = __hfma2(x[i], y[i], __floats2bfloat162_rn(1.f, -1.f));
  z[i] = __hmin2(g, __habs2(y[i]));
}

// Two phases separated by a grid-wide barrier: every block's partial sums are visible to
// block 0 after grid.sync().
__global__ void grid_two_phase(const float* in, float* partial, float* total, int n) {
  cg::grid_group grid = cg::this_grid();
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  float acc = 0.f;
  for (int i = grid.thread_rank(); i < n; i += grid.size()) acc += in[i];
  acc = cg::reduce(warp, acc, cg::plus<float>());
  if (warp.thread_rank() == 0) atomicAdd(&partial[blockIdx.x], acc);
  grid.sync();
  if (grid.thread_rank() == 0) {
    float s = 0.f;
    for (unsigned b = 0; b < gridDim.x; ++b) s += partial[b];
    *total = s;
  }
}
