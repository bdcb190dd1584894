// Plain CUDA C++ reference for bench's zero-copy, latency, round-trip and launch experiments
// (compared with bench's results by scripts/compare_paths.py). Written from scratch; the methods follow the brief
// and are compared with NVIDIA nvbandwidth's in the report that accompanies it.
// Build and run (on the GPU machine): nvcc -O2 -o ref_paths scripts/reference_paths.cu && ./ref_paths > paths.csv
// Everything runs on device 0, on one non-blocking stream. Output CSV on stdout: test,bytes,median,unit,samples
// (samples = repetitions the median is over). Any CUDA error or failed check prints file:line and exits 1.
//
// sm_h2d, sm_d2h (GB/s = 1e9 bytes/s): a copy kernel (the SMs copy, not a copy engine) between pinned host memory
//   (cudaHostAlloc default, mapped under UVA, device pointer from cudaHostGetDevicePointer) and cudaMalloc memory;
//   H2D reads host and writes device, D2H the reverse. 16-byte int4 loads and stores in a grid-stride loop, grid =
//   SMs x resident 512-thread blocks per SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor), a tail that is not a
//   multiple of 16 bytes copied byte-wise. Sizes 4 KiB .. 1 GiB, every power of 4. Per size: one verified copy
//   (source a pseudo-random pattern without 0xA5 bytes, destination poisoned with 0xA5, compared on the host),
//   3 warm-up copies, then 21 repetitions of [event, N back-to-back launches, event], N chosen from one timed copy
//   so that a repetition takes >= 2 ms (1..1000). Median per-copy time; GB/s = bytes / median.
// chase_host, chase_device (ns per dependent access): one thread follows a pointer chain of `kSteps` = 4096
//   dependent 8-byte loads. The working set is split into 256-byte slots; slot i holds at its first 8 bytes the
//   byte offset of the next slot; the order is one random cycle through all slots (seeded Fisher-Yates shuffle,
//   slot order[k] -> order[k + 1]). The walk starts at offset 0 and stores its final offset (checked against the
//   host's walk of the same chain). chase_host: pinned host memory read through its mapped device pointer;
//   chase_device: cudaMalloc memory (chain built on the host, then cudaMemcpy). Working sets 1 MiB and 256 MiB.
//   Per size: one launch from offset 0 (checked), then 21 repetitions of [event, 1 launch, event], each launch
//   starting where the previous one ended (the offset is kept in `result`), so successive launches walk on through
//   the chain and a working set beyond the L2 cache is read from DRAM; median time / 4096 in ns.
// roundtrip_h2d, roundtrip_d2h (host µs): std::chrono::steady_clock around cudaMemcpyAsync(size) between pinned
//   host and device memory; cudaEventRecord(e, stream); cudaEventSynchronize(e) (e created with
//   cudaEventDisableTiming, as bench's round trip does). Sizes 4 B .. 64 KiB. 100 warm-ups, then 501 repetitions; median.
// launch_kernel (host µs, bytes 0): one sample = host time of 100 back-to-back launches of an empty
//   `empty(unsigned int*, long long, int)` kernel <<<1, 1, 0, stream>>>, / 100; then cudaStreamSynchronize,
//   untimed. 20 warm-up samples, then 201 samples; median.
// graph_replay (host µs, bytes 0): the same 100 launches captured once into a CUDA graph (stream capture) and
//   instantiated; one sample = host time of one cudaGraphLaunch / 100, then cudaStreamSynchronize, untimed.
//   20 warm-up samples, then 201 samples; median.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(call)                                                                                        \
  do {                                                                                                     \
    cudaError_t err_ = (call);                                                                             \
    if (err_ != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_));         \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)

// A failed check of our own (a wrong copy, a wrong chain walk): file:line and the reason, exit 1.
#define REQUIRE(condition, ...)                                                                            \
  do {                                                                                                     \
    if (!(condition)) {                                                                                    \
      std::fprintf(stderr, "%s:%d check failed: %s: ", __FILE__, __LINE__, #condition);                    \
      std::fprintf(stderr, __VA_ARGS__);                                                                   \
      std::fprintf(stderr, "\n");                                                                          \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)

namespace {

constexpr int kCopyThreads = 512;
constexpr int kCopyReps = 21;
constexpr double kCopyRepMs = 2.0;
constexpr int kMaxCopiesPerRep = 1000;
constexpr size_t kSlot = 256;
constexpr int kSteps = 4096;
int chase_reps = 21;  // CHASE_REPS overrides (the latency diagnosis: do more launches change the figure?)
constexpr int kRoundtripWarmups = 100;
constexpr int kRoundtripReps = 501;
constexpr int kLaunches = 100;
constexpr int kLaunchWarmups = 20;
constexpr int kLaunchSamples = 201;
constexpr unsigned char kPoison = 0xA5;

__global__ void copy_kernel(int4 *__restrict__ dst, const int4 *__restrict__ src, size_t bytes) {
  const size_t vectors = bytes / sizeof(int4);
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = first; i < vectors; i += stride) dst[i] = src[i];
  const size_t tail = bytes % sizeof(int4);  // the first `tail` threads copy the last bytes one each
  if (first < tail) {
    const size_t at = vectors * sizeof(int4) + first;
    reinterpret_cast<unsigned char *>(dst)[at] = reinterpret_cast<const unsigned char *>(src)[at];
  }
}

__global__ void chase_kernel(const unsigned char *base, int steps, uint64_t *result) {
  uint64_t offset = *result;  // where the previous walk ended
  for (int i = 0; i < steps; ++i) offset = *reinterpret_cast<const volatile uint64_t *>(base + offset);
  *result = offset;
}

__global__ void empty(unsigned int *, long long, int) {}

uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename T>
T median(std::vector<T> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];  // every sample count here is odd
}

void print_row(const char *test, size_t bytes, double value, const char *unit, int samples) {
  std::printf("%s,%zu,%.6g,%s,%d\n", test, bytes, value, unit, samples);
  std::fflush(stdout);
}

double host_us_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

struct Gpu {
  cudaStream_t stream;
  cudaEvent_t start, stop;
};

float event_ms(const Gpu &gpu) {
  CHECK(cudaEventSynchronize(gpu.stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, gpu.start, gpu.stop));
  return ms;
}

// --- sm_h2d, sm_d2h ---------------------------------------------------------------------------------------------

void sm_copies(const Gpu &gpu, unsigned char *host, unsigned char *host_mapped, unsigned char *device,
               size_t largest) {
  int device_id = 0, sms = 0, blocks_per_sm = 0;
  CHECK(cudaGetDevice(&device_id));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_id));
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, copy_kernel, kCopyThreads, 0));
  const int grid = sms * blocks_per_sm;
  std::fprintf(stderr, "copy kernel: %d SMs x %d blocks of %d threads\n", sms, blocks_per_sm, kCopyThreads);

  std::vector<unsigned char> pattern(largest);  // one pattern; every size copies a prefix of it
  uint64_t state = 42;
  for (size_t i = 0; i < largest; i += 8) {
    uint64_t word = splitmix64(state);
    for (size_t b = 0; b < 8 && i + b < largest; ++b, word >>= 8) {
      const unsigned char byte = static_cast<unsigned char>(word);
      pattern[i + b] = byte == kPoison ? 0x5A : byte;
    }
  }
  std::unique_ptr<unsigned char[]> readback(new unsigned char[largest]);

  for (int d = 0; d < 2; ++d) {
    const bool h2d = d == 0;
    int4 *dst = reinterpret_cast<int4 *>(h2d ? device : host_mapped);
    const int4 *src = reinterpret_cast<const int4 *>(h2d ? host_mapped : device);
    for (size_t bytes = size_t(1) << 12; bytes <= largest; bytes <<= 2) {
      // Verify once: pattern in the source, 0xA5 in the destination, one copy, compare on the host.
      if (h2d) {
        std::memcpy(host, pattern.data(), bytes);
        CHECK(cudaMemset(device, kPoison, bytes));
      } else {
        CHECK(cudaMemcpy(device, pattern.data(), bytes, cudaMemcpyHostToDevice));
        std::memset(host, kPoison, bytes);
      }
      CHECK(cudaDeviceSynchronize());
      copy_kernel<<<grid, kCopyThreads, 0, gpu.stream>>>(dst, src, bytes);
      CHECK(cudaGetLastError());
      CHECK(cudaStreamSynchronize(gpu.stream));
      const unsigned char *copied = host;
      if (h2d) {
        CHECK(cudaMemcpy(readback.get(), device, bytes, cudaMemcpyDeviceToHost));
        copied = readback.get();
      }
      const size_t at = std::mismatch(copied, copied + bytes, pattern.data()).first - copied;
      REQUIRE(at == bytes, "%s copy of %zu bytes differs at byte %zu (0x%02x, expected 0x%02x)",
              h2d ? "H2D" : "D2H", bytes, at, copied[at], pattern[at]);

      for (int i = 0; i < 3; ++i) copy_kernel<<<grid, kCopyThreads, 0, gpu.stream>>>(dst, src, bytes);
      CHECK(cudaGetLastError());
      CHECK(cudaEventRecord(gpu.start, gpu.stream));
      copy_kernel<<<grid, kCopyThreads, 0, gpu.stream>>>(dst, src, bytes);
      CHECK(cudaEventRecord(gpu.stop, gpu.stream));
      const double one_ms = std::max(double(event_ms(gpu)), 1e-6);  // one timed copy sets N
      const int copies = static_cast<int>(std::clamp(std::ceil(kCopyRepMs / one_ms), 1.0, double(kMaxCopiesPerRep)));

      std::vector<double> per_copy_s;
      for (int rep = 0; rep < kCopyReps; ++rep) {
        CHECK(cudaEventRecord(gpu.start, gpu.stream));
        for (int i = 0; i < copies; ++i) copy_kernel<<<grid, kCopyThreads, 0, gpu.stream>>>(dst, src, bytes);
        CHECK(cudaEventRecord(gpu.stop, gpu.stream));
        CHECK(cudaGetLastError());
        per_copy_s.push_back(event_ms(gpu) / 1e3 / copies);
      }
      print_row(h2d ? "sm_h2d" : "sm_d2h", bytes, bytes / median(per_copy_s) / 1e9, "GB/s", kCopyReps);
    }
  }
}

// --- chase_host, chase_device -----------------------------------------------------------------------------------

// Writes the chain into `chain` (`bytes` long, host-addressable) and returns the offset reached after kSteps loads.
uint64_t build_chain(unsigned char *chain, size_t bytes, uint64_t seed) {
  const size_t slots = bytes / kSlot;
  std::vector<uint64_t> order(slots);
  for (size_t i = 0; i < slots; ++i) order[i] = i;
  for (size_t i = slots - 1; i > 0; --i) std::swap(order[i], order[splitmix64(seed) % (i + 1)]);
  for (size_t k = 0; k < slots; ++k) {
    const uint64_t next = order[(k + 1) % slots] * kSlot;
    std::memcpy(chain + order[k] * kSlot, &next, sizeof next);
  }
  uint64_t offset = 0;
  for (int i = 0; i < kSteps; ++i) std::memcpy(&offset, chain + offset, sizeof offset);
  return offset;
}

void chase(const Gpu &gpu, const char *test, const unsigned char *base, size_t bytes, uint64_t expected,
           uint64_t *result) {
  CHECK(cudaMemset(result, 0, sizeof(uint64_t)));
  chase_kernel<<<1, 1, 0, gpu.stream>>>(base, kSteps, result);  // warm-up, and the check of the walk
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(gpu.stream));
  uint64_t reached = 0;
  CHECK(cudaMemcpy(&reached, result, sizeof reached, cudaMemcpyDeviceToHost));
  REQUIRE(reached == expected, "%s %zu: the kernel's walk ended at %llu, the host's at %llu", test, bytes,
          (unsigned long long)reached, (unsigned long long)expected);
  std::vector<double> ns;
  for (int rep = 0; rep < chase_reps; ++rep) {
    CHECK(cudaEventRecord(gpu.start, gpu.stream));
    chase_kernel<<<1, 1, 0, gpu.stream>>>(base, kSteps, result);
    CHECK(cudaEventRecord(gpu.stop, gpu.stream));
    CHECK(cudaGetLastError());
    ns.push_back(event_ms(gpu) * 1e6 / kSteps);
  }
  print_row(test, bytes, median(ns), "ns", chase_reps);
}

void chases(const Gpu &gpu) {
  // Each chase gets buffers of exactly its working set, allocated for it (as bench does): a chain inside a larger
  // allocation can sit on differently mapped pages, and DRAM latency includes the page-table walk.
  uint64_t *result = nullptr;
  CHECK(cudaMalloc(&result, sizeof(uint64_t)));
  const size_t sizes[] = {size_t(1) << 20, size_t(1) << 28};
  for (size_t bytes : sizes) {
    unsigned char *host = nullptr, *host_mapped = nullptr;
    CHECK(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
    CHECK(cudaHostGetDevicePointer(reinterpret_cast<void **>(&host_mapped), host, 0));
    const uint64_t expected = build_chain(host, bytes, 7 + bytes);
    chase(gpu, "chase_host", host_mapped, bytes, expected, result);
    CHECK(cudaFreeHost(host));
  }
  for (size_t bytes : sizes) {
    unsigned char *device = nullptr;
    CHECK(cudaMalloc(&device, bytes));
    std::vector<unsigned char> chain(bytes);
    uint64_t expected = build_chain(chain.data(), bytes, 7 + bytes);
    // The latency diagnosis swaps chains with bench: CHAIN_IN_<bytes> replaces this chain with one read from that
    // file, CHAIN_OUT_<bytes> writes this one out (raw little-endian words, as bench's pointer_chain).
    const std::string name = std::to_string(bytes);
    if (const char *in = std::getenv(("CHAIN_IN_" + name).c_str())) {
      FILE *file = std::fopen(in, "rb");
      REQUIRE(file && std::fread(chain.data(), 1, bytes, file) == bytes, "cannot read %s", in);
      std::fclose(file);
      uint64_t offset = 0;
      for (int i = 0; i < kSteps; ++i) std::memcpy(&offset, chain.data() + offset, sizeof offset);
      expected = offset;
    }
    if (const char *out = std::getenv(("CHAIN_OUT_" + name).c_str())) {
      FILE *file = std::fopen(out, "wb");
      REQUIRE(file && std::fwrite(chain.data(), 1, bytes, file) == bytes, "cannot write %s", out);
      std::fclose(file);
    }
    CHECK(cudaMemcpy(device, chain.data(), bytes, cudaMemcpyHostToDevice));
    chase(gpu, "chase_device", device, bytes, expected, result);
    CHECK(cudaFree(device));
  }
  CHECK(cudaFree(result));
}

// --- roundtrip_h2d, roundtrip_d2h -------------------------------------------------------------------------------

void roundtrips(const Gpu &gpu, unsigned char *host, unsigned char *device) {
  cudaEvent_t done;
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  const size_t sizes[] = {4, 64, 1024, 4096, 16384, 65536};
  for (int d = 0; d < 2; ++d) {
    const bool h2d = d == 0;
    void *dst = h2d ? static_cast<void *>(device) : static_cast<void *>(host);
    const void *src = h2d ? static_cast<const void *>(host) : static_cast<const void *>(device);
    const cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    for (size_t bytes : sizes) {
      auto roundtrip = [&] {
        const auto start = std::chrono::steady_clock::now();
        CHECK(cudaMemcpyAsync(dst, src, bytes, kind, gpu.stream));
        CHECK(cudaEventRecord(done, gpu.stream));
        CHECK(cudaEventSynchronize(done));
        return host_us_since(start);
      };
      for (int i = 0; i < kRoundtripWarmups; ++i) roundtrip();
      std::vector<double> us;
      for (int rep = 0; rep < kRoundtripReps; ++rep) us.push_back(roundtrip());
      print_row(h2d ? "roundtrip_h2d" : "roundtrip_d2h", bytes, median(us), "us", kRoundtripReps);
    }
  }
  CHECK(cudaEventDestroy(done));
}

// --- launch_kernel, graph_replay --------------------------------------------------------------------------------

void launches(const Gpu &gpu) {
  unsigned int *data = nullptr;
  CHECK(cudaMalloc(&data, sizeof(unsigned int)));
  auto launch_all = [&] {
    for (int i = 0; i < kLaunches; ++i) empty<<<1, 1, 0, gpu.stream>>>(data, 1, 0);
  };

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(gpu.stream, cudaStreamCaptureModeThreadLocal));
  launch_all();
  CHECK(cudaStreamEndCapture(gpu.stream, &graph));
  CHECK(cudaGetLastError());
  CHECK(cudaGraphInstantiate(&exec, graph, 0));

  auto sampled = [&](const char *test, auto call) {
    auto sample = [&] {
      const auto start = std::chrono::steady_clock::now();
      call();
      const double us = host_us_since(start) / kLaunches;
      CHECK(cudaGetLastError());
      CHECK(cudaStreamSynchronize(gpu.stream));
      return us;
    };
    for (int i = 0; i < kLaunchWarmups; ++i) sample();
    std::vector<double> us;
    for (int i = 0; i < kLaunchSamples; ++i) us.push_back(sample());
    print_row(test, 0, median(us), "us", kLaunchSamples);
  };
  sampled("launch_kernel", launch_all);
  sampled("graph_replay", [&] { CHECK(cudaGraphLaunch(exec, gpu.stream)); });

  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(data));
}

}  // namespace

int main() {
  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(stderr, "device 0: %s\n", prop.name);

  const size_t largest = size_t(1) << 30;
  unsigned char *host = nullptr, *host_mapped = nullptr, *device = nullptr;
  CHECK(cudaHostAlloc(&host, largest, cudaHostAllocDefault));
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void **>(&host_mapped), host, 0));
  CHECK(cudaMalloc(&device, largest));
  Gpu gpu;
  CHECK(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking));
  CHECK(cudaEventCreate(&gpu.start));
  CHECK(cudaEventCreate(&gpu.stop));

  if (const char *reps = std::getenv("CHASE_REPS")) chase_reps = std::atoi(reps);
  const bool only_chase = std::getenv("ONLY_CHASE") != nullptr;  // the chases alone (the latency diagnosis)
  std::printf("test,bytes,median,unit,samples\n");
  if (!only_chase) sm_copies(gpu, host, host_mapped, device, largest);
  chases(gpu);
  if (!only_chase) {
    roundtrips(gpu, host, device);
    launches(gpu);
  }

  CHECK(cudaEventDestroy(gpu.start));
  CHECK(cudaEventDestroy(gpu.stop));
  CHECK(cudaStreamDestroy(gpu.stream));
  CHECK(cudaFreeHost(host));
  CHECK(cudaFree(device));
  return 0;
}
