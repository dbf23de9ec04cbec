// Wave 3: the asynchronous pieces of libcu++ and the CUDA runtime headers, as application code
// uses them without cuda::ptx: cuda::barrier with cuda::memcpy_async (an mbarrier initialised by
// init(), arrive_and_wait, the copy's completion tracked by the barrier), a double-buffered
// cuda::pipeline (cp.async + commit/wait groups), warp-level wmma (mma.sync through
// wmma::load_matrix_sync), assert (an __assertfail call), double and half atomics, and device
// malloc/free. Clean.
#include <cassert>
#include <cooperative_groups.h>
#include <cuda/barrier>
#include <cuda/pipeline>
#include <cuda_fp16.h>
#include <mma.h>

namespace cg = cooperative_groups;
// the usual suppression: the barrier is initialised by init(), not by a constructor
#pragma nv_diag_suppress static_var_with_dynamic_init
using barrier_t = cuda::barrier<cuda::thread_scope_block>;

constexpr int kThreads = 256;
constexpr int kTile = 1024;

__global__ void __launch_bounds__(kThreads)
barrier_memcpy_async(const float* in, float* out, int ntiles) {
  __shared__ alignas(16) float tile[kTile];
  __shared__ barrier_t bar;
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  for (int t = 0; t < ntiles; ++t) {
    cuda::memcpy_async(block, tile, in + t * kTile, sizeof(tile), bar);
    bar.arrive_and_wait();          // the copy has landed
    float acc = 0.f;
    for (int i = block.thread_rank(); i < kTile; i += kThreads) acc += tile[i];
    atomicAdd(&out[t], acc);
    bar.arrive_and_wait();          // everyone is done reading before the next copy
  }
}

__global__ void __launch_bounds__(kThreads)
pipeline_double_buffer(const float* in, float* out, int ntiles) {
  __shared__ alignas(16) float buf[2][kThreads];
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  const int tid = threadIdx.x;
  pipe.producer_acquire();
  cuda::memcpy_async(&buf[0][tid], &in[tid], sizeof(float), pipe);
  pipe.producer_commit();
  float acc = 0.f;
  for (int t = 0; t < ntiles; ++t) {
    if (t + 1 < ntiles) {
      pipe.producer_acquire();
      cuda::memcpy_async(&buf[(t + 1) & 1][tid], &in[(t + 1) * kThreads + tid], sizeof(float),
                         pipe);
      pipe.producer_commit();
    }
    cuda::pipeline_consumer_wait_prior<1>(pipe);   // tile t is in (its own thread's copy)
    acc += buf[t & 1][tid];
    pipe.consumer_release();
  }
  out[blockIdx.x * kThreads + tid] = acc;
}

__global__ void wmma_gemm_16x16(const half* a, const half* b, float* c, int k) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.f);
  for (int kk = 0; kk < k; kk += 16) {
    wmma::load_matrix_sync(fa, a + kk, k);
    wmma::load_matrix_sync(fb, b + kk, k);
    wmma::mma_sync(fc, fa, fb, fc);
  }
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

__global__ void atomics_assert_malloc(const double* x, double* sum, __half2* hsum,
                                      int* scratch_sizes, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  assert(x[i] == x[i]);   // no NaN
  atomicAdd(sum, x[i]);
  atomicAdd(hsum, __floats2half2_rn(1.f, static_cast<float>(x[i])));
  const int len = (scratch_sizes[i] & 15) + 1;
  int* scratch = static_cast<int*>(malloc(len * sizeof(int)));
  if (scratch == nullptr) return;
  for (int k = 0; k < len; ++k) scratch[k] = k * i;
  scratch_sizes[i] = scratch[len - 1];
  free(scratch);
}
