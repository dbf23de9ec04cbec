// Wave 3: CUDA C++ that leans on the ABI: local arrays indexed at run time (.local), a
// recursive .func and non-inlined functions taking and returning structs by value (.param
// aggregates), device printf (a vprintf call with a local argument buffer), alloca (a
// dynamic stack), a texture object read (tex.2d with the object as a .u64 operand, no
// .texref), launch bounds (.maxntid / .minnctapersm), a required block size (__block_size__:
// .reqntid) and a register cap (.maxnreg). Clean.
#include <cstdio>

struct Pair {
  float lo, hi;
  int count;
};

__device__ __noinline__ Pair merge(Pair a, Pair b) {
  return Pair{fminf(a.lo, b.lo), fmaxf(a.hi, b.hi), a.count + b.count};
}

__device__ __noinline__ int fib(int k) { return k < 2 ? k : fib(k - 1) + fib(k - 2); }

__global__ void __launch_bounds__(128, 4)
local_and_calls(const float* in, const int* idx, float* out, int n) {
  float window[16];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < 16; ++k) window[k] = i + k < n ? in[i + k] : 0.f;
  Pair p{window[0], window[0], 1};
  for (int k = 1; k < 16; ++k) p = merge(p, Pair{window[k], window[k], 1});
  if (i < n) out[i] = window[idx[i] & 15] + p.hi - p.lo + static_cast<float>(fib(idx[i] & 7));
}

__global__ void __block_size__((128, 1, 1)) with_printf(const int* flags, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && flags[i] < 0) printf("block %d thread %d: bad flag %d at %d\n", blockIdx.x,
                                    threadIdx.x, flags[i], i);
}

__global__ void with_alloca(const int* lens, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int len = (lens[i] & 31) + 1;
  float* buf = static_cast<float*>(alloca(len * sizeof(float)));
  for (int k = 0; k < len; ++k) buf[k] = k * 0.5f;
  float s = 0.f;
  for (int k = len - 1; k >= 0; --k) s += buf[(k * 7) % len];
  out[i] = s;
}

__global__ void __maxnreg__(64)
texture_sample(cudaTextureObject_t tex, float* out, int w, int h) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(tex, x + 0.5f, y + 0.5f) +
                                       tex2D<float>(tex, x - 0.5f, y + 0.5f);
}
