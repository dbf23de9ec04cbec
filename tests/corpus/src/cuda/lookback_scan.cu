// Wave 3: a hand-written single-pass scan with decoupled look-back, the protocol CUB's
// DeviceScan uses, in plain CUDA C++ atomics: each tile publishes its aggregate then its
// inclusive prefix with st.release / atom.cas on a status word, and the next tiles read the
// predecessors' words with ld.acquire, backing off with __nanosleep. Clean.
#include <cuda/atomic>

constexpr int kThreads = 128;
constexpr unsigned kInvalid = 0, kAggregate = 1, kPrefix = 2;

struct alignas(8) TileStatus {
  unsigned flag;
  int value;
};

__device__ unsigned long long pack(unsigned flag, int value) {
  return (static_cast<unsigned long long>(static_cast<unsigned>(value)) << 32) | flag;
}

__global__ void __launch_bounds__(kThreads, 4)
lookback_scan(const int* in, int* out, unsigned long long* status, unsigned* tile_counter,
              int n) {
  __shared__ int tile_id;
  __shared__ int warp_sums[kThreads / 32];
  __shared__ int exclusive;
  if (threadIdx.x == 0) tile_id = atomicAdd(tile_counter, 1);   // tiles in launch order
  __syncthreads();
  const int tile = tile_id;
  const int i = tile * kThreads + threadIdx.x;
  int x = i < n ? in[i] : 0;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int d = 1; d < 32; d *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  int before = 0, aggregate = 0;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w < warp) before += warp_sums[w];
    aggregate += warp_sums[w];
  }
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> mine(status[tile]);
    int prefix = 0;
    if (tile == 0) {
      mine.store(pack(kPrefix, aggregate), cuda::memory_order_release);
    } else {
      mine.store(pack(kAggregate, aggregate), cuda::memory_order_release);
      unsigned ns = 8;
      for (int t = tile - 1; t >= 0;) {
        cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> pred(status[t]);
        const unsigned long long word = pred.load(cuda::memory_order_acquire);
        const unsigned flag = static_cast<unsigned>(word);
        if (flag == kInvalid) {
          __nanosleep(ns);
          ns = ns < 256 ? ns * 2 : ns;
          continue;
        }
        prefix += static_cast<int>(word >> 32);
        if (flag == kPrefix) break;
        --t;
      }
      unsigned long long expected = pack(kAggregate, aggregate);
      mine.compare_exchange_strong(expected, pack(kPrefix, prefix + aggregate),
                                   cuda::memory_order_release, cuda::memory_order_relaxed);
    }
    exclusive = prefix;
  }
  __syncthreads();
  if (i < n) out[i] = exclusive + before + x;
}
