// Wave 3: CUB as libraries use it. A block-wide reduce and scan (cub::BlockReduce,
// cub::BlockScan: shuffles plus shared-memory exchange), and the single-pass device scan
// (cub::DeviceScan::InclusiveSum's kernels, instantiated from the host call): decoupled
// look-back over tile descriptors (ld.relaxed / ld.acquire, st.release, fences,
// __nanosleep back-off). Clean.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
block_reduce_scan(const int* in, int* sums, int* prefix, int n) {
  using Reduce = cub::BlockReduce<int, kThreads>;
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  } temp;
  const int i = blockIdx.x * kThreads + threadIdx.x;
  const int x = i < n ? in[i] : 0;
  const int total = Reduce(temp.reduce).Sum(x);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
  __syncthreads();   // temp is reused by the scan
  int y;
  Scan(temp.scan).ExclusiveSum(x, y);
  if (i < n) prefix[i] = y;
}

// Instantiates DeviceScanInitKernel and DeviceScanKernel (decoupled look-back).
cudaError_t device_inclusive_sum(void* temp, size_t& bytes, const float* in, float* out,
                                 int n, cudaStream_t stream) {
  return cub::DeviceScan::InclusiveSum(temp, bytes, in, out, n, stream);
}
