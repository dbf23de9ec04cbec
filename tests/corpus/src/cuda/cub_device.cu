// Wave 3: CUB's device-wide algorithms as Thrust and PyTorch call them, instantiated from the
// host calls: DeviceReduce::Sum and DeviceSelect::If (single-pass with a look-back over tile
// states), or, with CORPUS_CUB_RADIX_SORT, DeviceRadixSort::SortKeys (init, histogram,
// exclusive-sum, onesweep and single-tile kernels: ballot-based ranking in shared memory,
// shared-memory atomics, griddepcontrol.wait of programmatic dependent launch). Clean.
#ifdef CORPUS_CUB_RADIX_SORT
#include <cub/device/device_radix_sort.cuh>

cudaError_t sort_keys(void* temp, size_t& bytes, const unsigned* in, unsigned* out, int n) {
  return cub::DeviceRadixSort::SortKeys(temp, bytes, in, out, n);
}
#else
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_select.cuh>

struct Positive {
  __device__ bool operator()(int x) const { return x > 0; }
};

cudaError_t reduce_sum(void* temp, size_t& bytes, const float* in, float* out, int n) {
  return cub::DeviceReduce::Sum(temp, bytes, in, out, n);
}

cudaError_t select_positive(void* temp, size_t& bytes, const int* in, int* out, int* count,
                            int n) {
  return cub::DeviceSelect::If(temp, bytes, in, out, count, n, Positive());
}
#endif
