// test_emulator.cpp — ctest of the SIMT emulator itself (native/emu): what it must run (shuffles,
// ballots, block reductions, grid-stride loops, several devices) and what it must refuse, each
// refusal in a child process that has to die with the emulator's message: a divergent or
// partial-mask collective, __syncthreads after a thread exited, divergent barriers, a host pointer
// or another device's memory passed to a kernel, a copy in the wrong direction, host code touching
// device memory. A block reduction without its barrier must give a wrong sum under the schedule.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cuda_runtime.h"

static int g_pass = 0, g_fail = 0;

static void check(bool ok, const char* what) {
    if (ok) {
        ++g_pass;
    } else {
        ++g_fail;
        printf("FAIL %s\n", what);
    }
}

// ---- kernels that must run ---------------------------------------------------------------

__global__ void warp_ops_kernel(int* out) {
    const int lane = (int)(threadIdx.x & 31u);
    const int base = (int)(blockIdx.x * blockDim.x + threadIdx.x) * 6;
    out[base + 0] = __shfl_sync(0xffffffffu, lane * 10, 3);
    out[base + 1] = __shfl_xor_sync(0xffffffffu, lane, 5);
    out[base + 2] = __shfl_down_sync(0xffffffffu, lane, 4);
    out[base + 3] = __shfl_up_sync(0xffffffffu, lane, 2);
    out[base + 4] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
    out[base + 5] = __all_sync(0xffffffffu, lane < 32) + 2 * __any_sync(0xffffffffu, lane == 7);
}

// The block sum of kernels/drmas_common.cuh's shape: warp shuffles, one value per warp in shared
// memory, warp 0 adds them. `with_barrier` 0 drops the barrier between writing and reading.
__global__ void block_sum_kernel(const double* in, double* out, int with_barrier) {
    __shared__ double partial[32];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    double v = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) partial[warp] = v;
    if (with_barrier) __syncthreads();
    if (warp == 0) {
        double x = lane < blockDim.x / 32 ? partial[lane] : 0.0;
        for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_down_sync(0xffffffffu, x, offset);
        if (lane == 0) out[blockIdx.x] = x;
    }
    __syncthreads();
}

__global__ void grid_stride_kernel(long long n, int* out) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        atomicAdd(out + i, 1);
}

// ---- kernels that must be refused -------------------------------------------------------

__global__ void divergent_shfl_kernel(int* out) {
    int v = (int)threadIdx.x;
    if (threadIdx.x % 32 < 16) v = __shfl_sync(0xffffffffu, v, 0);  // half the warp skips it
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, v, 1);
}
__global__ void partial_mask_kernel(int* out) {
    out[threadIdx.x] = __shfl_sync(0x0000ffffu, (int)threadIdx.x, 0);
}
__global__ void exited_lane_kernel(int* out) {
    if (threadIdx.x == 5) return;
    out[threadIdx.x] = (int)__ballot_sync(0xffffffffu, 1);
}
__global__ void exited_thread_barrier_kernel(int* out) {
    if (threadIdx.x == 40) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}
__global__ void divergent_barrier_kernel(int* out) {
    if (threadIdx.x < 64) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1;
}
__global__ void loop_barrier_kernel(int* out) {
    // a data-dependent trip count: warp 1 passes the barrier once more than the others
    const int trips = threadIdx.x / 32 == 1 ? 2 : 1;
    for (int i = 0; i < trips; ++i) __syncthreads();
    out[threadIdx.x] = 1;
}
__global__ void write_kernel(int* out) { out[threadIdx.x] = 1; }

// Runs f in a child process: true when it died by signal `sig` and printed `expect`.
template <class F>
static bool dies_with(const char* what, int sig, const char* expect, F f) {
    fflush(stdout);
    int fds[2];
    if (pipe(fds) != 0) return false;
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        f();
        _exit(0);
    }
    close(fds[1]);
    std::string err;
    char buf[4096];
    ssize_t k;
    while ((k = read(fds[0], buf, sizeof buf)) > 0) err.append(buf, (size_t)k);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    const bool ok = WIFSIGNALED(status) && WTERMSIG(status) == sig && err.find(expect) != std::string::npos;
    if (!ok)
        printf("  %s: status 0x%x, expected signal %d and \"%s\"; stderr: %s\n", what, status, sig, expect,
               err.c_str());
    return ok;
}

static int* device_ints(size_t n) {
    void* p = nullptr;
    if (cudaMalloc(&p, n * sizeof(int)) != cudaSuccess) {
        printf("FATAL cudaMalloc\n");
        exit(1);
    }
    return (int*)p;
}

int main() {
    setenv("DRMAS_EMU_REPORT_SEGV", "1", 1);

    // Warp collectives: every lane's result as CUDA defines it.
    {
        int* d = device_ints(64 * 6);
        DRMAS_LAUNCH(warp_ops_kernel, 1, 64, 0, nullptr)(d);
        std::vector<int> h(64 * 6);
        check(cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess, "copy back");
        int bad = 0;
        unsigned ballot = 0;
        for (int l = 0; l < 32; ++l) ballot |= (l % 3 == 0 ? 1u : 0u) << l;
        for (int t = 0; t < 64; ++t) {
            const int lane = t % 32;
            const int* r = &h[t * 6];
            bad += r[0] != 30;
            bad += r[1] != (lane ^ 5);
            bad += r[2] != (lane + 4 < 32 ? lane + 4 : lane);
            bad += r[3] != (lane >= 2 ? lane - 2 : lane);
            bad += (unsigned)r[4] != ballot;
            bad += r[5] != 3;
        }
        check(bad == 0, "warp collectives give CUDA's results");
        cudaFree(d);
    }

    // A block reduction with its barrier is exact; without it, the schedule makes it wrong.
    {
        const int blocks = 64, threads = 256;
        std::vector<double> in(blocks * threads);
        for (size_t i = 0; i < in.size(); ++i) in[i] = (double)(i % 97) + 0.25;
        void *din = nullptr, *dout = nullptr;
        cudaMalloc(&din, in.size() * sizeof(double));
        cudaMalloc(&dout, blocks * sizeof(double));
        cudaMemcpy(din, in.data(), in.size() * sizeof(double), cudaMemcpyHostToDevice);
        for (int with = 1; with >= 0; --with) {
            DRMAS_LAUNCH(block_sum_kernel, blocks, threads, 0, nullptr)((const double*)din, (double*)dout, with);
            std::vector<double> out(blocks);
            cudaMemcpy(out.data(), dout, blocks * sizeof(double), cudaMemcpyDeviceToHost);
            int wrong = 0;
            for (int b = 0; b < blocks; ++b) {
                double want = 0;
                for (int t = 0; t < threads; ++t) want += in[b * threads + t];
                wrong += !(out[b] == want);
            }
            if (with)
                check(wrong == 0, "block sum with its barrier is exact");
            else
                check(wrong > blocks / 4, "block sum without its barrier is wrong in many blocks");
        }
        cudaFree(din);
        cudaFree(dout);
    }

    // Grid-stride loops over more items than threads.
    {
        const long long n = 10007;
        int* d = device_ints(n);
        cudaMemset(d, 0, n * sizeof(int));
        DRMAS_LAUNCH(grid_stride_kernel, 3, 128, 0, nullptr)(n, d);
        std::vector<int> h(n);
        cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost);
        int bad = 0;
        for (int v : h) bad += v != 1;
        check(bad == 0, "grid-stride loop visits every item once");
        cudaFree(d);
    }

    // Launch configuration errors are reported, not run.
    {
        int* d = device_ints(32);
        (void)cudaGetLastError();
        DRMAS_LAUNCH(write_kernel, 1, 2048, 0, nullptr)(d);
        check(cudaGetLastError() == cudaErrorInvalidConfiguration, "2048 threads a block: invalid configuration");
        cudaFree(d);
    }

    // Devices: allocations remember theirs; attributes answer from the registry.
    {
        int count = 0;
        check(cudaGetDeviceCount(&count) == cudaSuccess && count == 2, "two emulated devices by default");
        cudaSetDevice(1);
        int* d1 = device_ints(32);
        cudaSetDevice(0);
        cudaPointerAttributes a;
        check(cudaPointerGetAttributes(&a, d1 + 5) == cudaSuccess && a.type == cudaMemoryTypeDevice && a.device == 1,
              "an interior pointer of a device-1 allocation is device memory of device 1");
        int host = 0;
        check(cudaPointerGetAttributes(&a, &host) == cudaSuccess && a.type == cudaMemoryTypeUnregistered,
              "a host pointer is unregistered memory");
        check(cudaSetDevice(2) == cudaErrorInvalidDevice, "device 2 does not exist");
        check(dies_with("device-1 memory in a device-0 launch", SIGABRT, "is memory of device 1",
                        [&] { DRMAS_LAUNCH(write_kernel, 1, 32, 0, nullptr)(d1); }),
              "a kernel on device 0 refuses memory of device 1");
        cudaFree(d1);
    }

    // Refusals.
    int* d = device_ints(256);
    check(dies_with("divergent shuffle", SIGABRT, "divergent warp collective",
                    [&] { DRMAS_LAUNCH(divergent_shfl_kernel, 1, 64, 0, nullptr)(d); }),
          "a shuffle that half the warp skips aborts");
    check(dies_with("partial mask", SIGABRT, "with mask 0x0000ffff",
                    [&] { DRMAS_LAUNCH(partial_mask_kernel, 1, 32, 0, nullptr)(d); }),
          "a partial-mask shuffle aborts");
    check(dies_with("exited lane", SIGABRT, "has exited",
                    [&] { DRMAS_LAUNCH(exited_lane_kernel, 1, 32, 0, nullptr)(d); }),
          "a ballot after a lane exited aborts");
    check(dies_with("barrier after exit", SIGABRT, "but thread 40 has exited",
                    [&] { DRMAS_LAUNCH(exited_thread_barrier_kernel, 1, 128, 0, nullptr)(d); }),
          "__syncthreads after a thread exited aborts");
    check(dies_with("divergent barriers", SIGABRT, "divergent __syncthreads",
                    [&] { DRMAS_LAUNCH(divergent_barrier_kernel, 1, 128, 0, nullptr)(d); }),
          "two different __syncthreads aborts");
    check(dies_with("barrier counts", SIGABRT, "has exited",
                    [&] { DRMAS_LAUNCH(loop_barrier_kernel, 1, 128, 0, nullptr)(d); }),
          "a warp passing more barriers than the others aborts");
    int host[256];
    check(dies_with("host pointer argument", SIGABRT, "is not device memory",
                    [&] { DRMAS_LAUNCH(write_kernel, 1, 32, 0, nullptr)(host); }),
          "a host pointer as a kernel argument aborts");
    check(dies_with("copy direction", SIGABRT, "the destination",
                    [&] { cudaMemcpy(host, d, 16, cudaMemcpyHostToDevice); }),
          "a HostToDevice copy into host memory aborts");
    check(dies_with("copy range", SIGABRT, "run past the end",
                    [&] { cudaMemcpy(host, d + 200, 100 * sizeof(int), cudaMemcpyDeviceToHost); }),
          "a copy past the end of an allocation aborts");
    check(dies_with("host dereference", SIGSEGV, "host code touched a device allocation", [&] {
              volatile int* p = d;
              (void)p[3];
          }),
          "host code reading device memory faults");
    check(dies_with("double free", SIGABRT, "not device memory", [&] {
              int* e = device_ints(4);
              cudaFree(e);
              cudaFree(e);
          }),
          "a second cudaFree aborts");
    cudaFree(d);

    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
