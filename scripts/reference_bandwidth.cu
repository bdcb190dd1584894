// Plain CUDA C++ reference for bench's pinned H2D/D2H figures: a cudaMemcpyAsync loop timed with events.
// Build and run (on the GPU machine): nvcc -O2 -o ref scripts/reference_bandwidth.cu && ./ref > reference.csv
// For each size: 3 warm-up copies, then 15 repetitions of [event, N back-to-back copies, event]; prints the median
// per-copy time. Output CSV: direction,bytes,copies_per_rep,median_ms,gbps (gbps = bytes / median / 1e9).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t err_ = (call);                                                           \
    if (err_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

int main() {
  const size_t largest = size_t(1) << 30;
  unsigned char *host = nullptr, *device = nullptr;
  CHECK(cudaHostAlloc(&host, largest, cudaHostAllocDefault));
  CHECK(cudaMalloc(&device, largest));
  for (size_t i = 0; i < largest; i += 4096) host[i] = static_cast<unsigned char>(i * 2654435761u >> 24);
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::printf("direction,bytes,copies_per_rep,median_ms,gbps\n");
  for (int d = 0; d < 2; ++d) {
    const bool h2d = d == 0;
    for (size_t bytes = size_t(16) << 20; bytes <= largest; bytes <<= 1) {
      void *dst = h2d ? static_cast<void *>(device) : static_cast<void *>(host);
      const void *src = h2d ? static_cast<const void *>(host) : static_cast<const void *>(device);
      const cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
      const int copies = bytes <= (size_t(64) << 20) ? 8 : 2;
      for (int i = 0; i < 3; ++i) CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
      std::vector<float> per_copy;
      for (int rep = 0; rep < 15; ++rep) {
        CHECK(cudaEventRecord(start, stream));
        for (int i = 0; i < copies; ++i) CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
        CHECK(cudaEventRecord(stop, stream));
        CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        per_copy.push_back(ms / copies);
      }
      std::sort(per_copy.begin(), per_copy.end());
      const float median = per_copy[per_copy.size() / 2];
      std::printf("%s,%zu,%d,%.6f,%.3f\n", h2d ? "H2D" : "D2H", bytes, copies, median, bytes / (median * 1e6));
    }
  }
  CHECK(cudaFreeHost(host));
  CHECK(cudaFree(device));
  return 0;
}
