// Small helpers shared by the corpus's cuda::ptx kernels. Only NVIDIA's public headers are
// used (<cuda/ptx>, <cuda.h> for the CUtensorMap type); every kernel here is our own.
#pragma once

#include <cuda.h>
#include <cuda/ptx>
#include <cstdint>

namespace ptx = cuda::ptx;

namespace corpus {

// try_wait may give up before the phase completes, so every wait is a loop.
__device__ inline void wait_parity(uint64_t* bar, uint32_t parity) {
  while (!ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

__device__ inline bool warp_leader() { return ptx::elect_sync(0xffffffffu); }

// The tile every 2-D TMA kernel moves: 32 x 32 fp32 = 4096 bytes.
constexpr int kBox = 32;
// A function, not a variable: cuda::ptx takes counts by const reference, which would
// odr-use a host constexpr variable from device code.
__host__ __device__ constexpr uint32_t tile_bytes() { return kBox * kBox * sizeof(float); }

}  // namespace corpus
