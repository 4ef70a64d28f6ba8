// cuda_runtime.h (emulation) — the CUDA runtime and device built-ins that a host-C++ build of the
// unchanged kernels/*.cuh + native/src/cuda_backend.cu needs, so that the CUDA backend runs and is
// tested on a CPU (CMake target drmas_emu, ctest label "emulation"). It is found before any real
// cuda_runtime.h because native/emu is the first include folder of that build only.
// defines: DRMAS_LAUNCH, dim3, threadIdx/blockIdx/blockDim/gridDim, the warp collectives,
//          __syncthreads, atomics, the host API subset cuda_backend.cu calls, drmas_emu_counters
// How kernels execute (native/emu/simt.cpp): the blocks of a launch run one after another in a
// seeded random order; each CUDA thread is a fiber; a warp collective completes when all 32
// lanes have reached it and aborts, naming the collective and the lanes, when the mask is not
// full, a lane has exited or waits elsewhere; __syncthreads is the same for the block. __shared__
// variables are static storage (one block runs at a time), refilled with a NaN byte pattern at
// each block start; warps resume after each barrier in a seeded random order, so a missing barrier
// shows up as a wrong result. Atomics are plain read-modify-writes. Device allocations are
// registered, filled with garbage and inaccessible to host code outside launches and copies.
// What emulation cannot show (true concurrency, CUDA's ulps, the driver, speed): bench/README.md.
#pragma once

#define DRMAS_CUDA_EMULATION 1

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

// ---- qualifiers ---------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One block runs at a time, so a kernel's shared memory can be static storage. The section lets
// the emulator refill all of it between blocks; GCC refuses ("section type conflict") a __shared__
// variable in an inline function or a template next to one in a plain function: declare shared
// memory in plain (non-template) kernels, as kernels/*.cuh do.
#define __shared__ static __attribute__((section("drmas_emu_shared")))

// ---- types ----------------------------------------------------------------------------
struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

typedef struct CUstream_st* cudaStream_t;

enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoKernelImageForDevice = 209,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3,
};

struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void* devicePointer;
    void* hostPointer;
};

// The two attributes cuda_backend.cu asks for (the real enum's values).
enum cudaDeviceAttr {
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
};

struct cudaFuncAttributes {
    int numRegs;
};

// ---- host API (native/emu/simt.cpp) ----------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr);
// Every emulated device has compute capability DRMAS_EMU_COMPUTE_CAPABILITY ("7.5"; default
// "9.0"), and the emulated library has kernel images for 8.0 and newer, as libdrmas's default
// DRMAS_CUDA_ARCHITECTURES (80-real;90-real;90-virtual): below 8.0, cudaFuncGetAttributes and
// every launch fail with cudaErrorNoKernelImageForDevice, as on a real GPU.
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
namespace drmas_emu {
cudaError_t func_attributes(cudaFuncAttributes* attr);
}
template <class T>
inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, T*) {
    return drmas_emu::func_attributes(attr);
}

// ---- counters for tests ------------------------------------------------------------------
// drmas_emu_counters(out) fills out[DRMAS_EMU_COUNTERS] with the totals since the process
// started: kernel launches, memsets, copies into host memory from device memory, stream and
// device synchronisations. Exported from libdrmas_emu (not part of drmas.h), so that a test can
// assert that a call never waits for the device; a test declares it weak, as libdrmas lacks it.
#define DRMAS_EMU_LAUNCHES 0
#define DRMAS_EMU_MEMSETS 1
#define DRMAS_EMU_TO_HOST 2
#define DRMAS_EMU_SYNCS 3
#define DRMAS_EMU_COUNTERS 4
extern "C" __attribute__((visibility("default"))) void drmas_emu_counters(uint64_t* out);
// drmas_emu_fail_next_mallocs(n): the next n cudaMallocAsync calls (libdrmas's scratch) fail with
// cudaErrorMemoryAllocation, as on a GPU that another allocator (LibTorch's cache) has filled; so
// that a test can see the caller reclaim that memory and call again.
extern "C" __attribute__((visibility("default"))) void drmas_emu_fail_next_mallocs(int n);
// drmas_emu_contexts(forget) returns the devices whose primary context exists (bit d), as CUDA 12+
// creates them (cudaSetDevice, or a first allocation, launch or function query on the current
// device); forget != 0 returns them and then forgets them all (a test's fresh start).
extern "C" __attribute__((visibility("default"))) uint32_t drmas_emu_contexts(int forget);

// ---- the emulator's interface to kernels ------------------------------------------------
namespace drmas_emu {

enum Collective : int { kShfl, kShflUp, kShflDown, kShflXor, kBallot, kAll, kAny, kSyncWarp };

// Coordinates of the running thread and launch (valid inside a kernel only).
extern const uint3* g_thread_idx;
extern uint3 g_block_idx;
extern dim3 g_block_dim, g_grid_dim;

// Blocks the calling lane until its whole warp reaches the same collective; returns its result.
uint64_t warp_collective(Collective op, unsigned mask, uint64_t bits, int arg, int width, const char* file,
                         int line);
void sync_threads(const char* file, int line);

template <class T>
inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "a warp shuffle moves at most 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T>
inline T from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof(T));
    return v;
}

struct Launch {
    const char* name;
    dim3 grid;
    dim3 block;
    size_t shared_bytes;
    cudaStream_t stream;
};

// Runs body(ctx) once per CUDA thread of the launch (or records cudaErrorInvalidConfiguration).
void run_kernel(const Launch& launch, void (*body)(void*), void* ctx);
// Aborts unless p is NULL or device memory of the current device (a kernel argument check).
void check_kernel_pointer(const Launch& launch, int index, const void* p);

template <class... P>
class Launcher {
public:
    Launcher(void (*kernel)(P...), const Launch& launch) : kernel_(kernel), launch_(launch) {}

    // The arguments convert to the parameter types once, as a real launch copies them.
    template <class... A>
    void operator()(A&&... args) const {
        static_assert(sizeof...(A) == sizeof...(P), "wrong number of kernel arguments");
        using Params = std::tuple<std::decay_t<P>...>;
        struct Context {
            void (*kernel)(P...);
            Params params;
        };
        Context ctx{kernel_, Params(static_cast<std::decay_t<P>>(std::forward<A>(args))...)};
        check_pointers(ctx.params, std::index_sequence_for<P...>{});
        run_kernel(
            launch_, [](void* c) {
                Context* x = static_cast<Context*>(c);
                std::apply(x->kernel, x->params);  // every thread gets its own copy of the parameters
            },
            &ctx);
    }

private:
    template <class Tuple, size_t... I>
    void check_pointers(const Tuple& t, std::index_sequence<I...>) const {
        (check_one((int)I, std::get<I>(t)), ...);
    }
    template <class T>
    void check_one(int index, const T& v) const {
        if constexpr (std::is_pointer<T>::value) check_kernel_pointer(launch_, index, (const void*)v);
    }

    void (*kernel_)(P...);
    Launch launch_;
};

template <class... P>
Launcher<P...> launcher(void (*kernel)(P...), const Launch& launch) {
    return Launcher<P...>(kernel, launch);
}

}  // namespace drmas_emu

// DRMAS_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...): kernel<<<...>>>(args...) with nvcc
// (kernels/drmas_common.cuh), an emulated launch here.
#define DRMAS_LAUNCH(kernel, grid, block, smem, stream) \
    ::drmas_emu::launcher(kernel, ::drmas_emu::Launch{#kernel, dim3(grid), dim3(block), (size_t)(smem), (stream)})

// ---- device built-ins -----------------------------------------------------------------
#define threadIdx (*::drmas_emu::g_thread_idx)
#define blockIdx (::drmas_emu::g_block_idx)
#define blockDim (::drmas_emu::g_block_dim)
#define gridDim (::drmas_emu::g_grid_dim)
#define warpSize 32

inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    ::drmas_emu::sync_threads(file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    (void)::drmas_emu::warp_collective(::drmas_emu::kSyncWarp, mask, 0, 0, 32, file, line);
}

template <class T>
inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32, const char* file = __builtin_FILE(),
                     int line = __builtin_LINE()) {
    return ::drmas_emu::from_bits<T>(
        ::drmas_emu::warp_collective(::drmas_emu::kShfl, mask, ::drmas_emu::to_bits(v), src_lane, width, file, line));
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32, const char* file = __builtin_FILE(),
                        int line = __builtin_LINE()) {
    return ::drmas_emu::from_bits<T>(::drmas_emu::warp_collective(::drmas_emu::kShflUp, mask, ::drmas_emu::to_bits(v),
                                                                  (int)delta, width, file, line));
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32, const char* file = __builtin_FILE(),
                          int line = __builtin_LINE()) {
    return ::drmas_emu::from_bits<T>(::drmas_emu::warp_collective(
        ::drmas_emu::kShflDown, mask, ::drmas_emu::to_bits(v), (int)delta, width, file, line));
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32, const char* file = __builtin_FILE(),
                         int line = __builtin_LINE()) {
    return ::drmas_emu::from_bits<T>(::drmas_emu::warp_collective(::drmas_emu::kShflXor, mask, ::drmas_emu::to_bits(v),
                                                                  lane_mask, width, file, line));
}
inline unsigned __ballot_sync(unsigned mask, int pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return (unsigned)::drmas_emu::warp_collective(::drmas_emu::kBallot, mask, pred != 0, 0, 32, file, line);
}
inline int __all_sync(unsigned mask, int pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return (int)::drmas_emu::warp_collective(::drmas_emu::kAll, mask, pred != 0, 0, 32, file, line);
}
inline int __any_sync(unsigned mask, int pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return (int)::drmas_emu::warp_collective(::drmas_emu::kAny, mask, pred != 0, 0, 32, file, line);
}

// Fibers of one block run on one host thread, one at a time: a read-modify-write is atomic.
template <class T>
inline T atomicAdd(T* address, T v) {
    const T old = *address;
    *address = old + v;
    return old;
}
template <class T>
inline T atomicMin(T* address, T v) {
    const T old = *address;
    if (v < old) *address = v;
    return old;
}
template <class T>
inline T atomicMax(T* address, T v) {
    const T old = *address;
    if (v > old) *address = v;
    return old;
}
template <class T>
inline T atomicExch(T* address, T v) {
    const T old = *address;
    *address = v;
    return old;
}
template <class T>
inline T atomicCAS(T* address, T compare, T v) {
    const T old = *address;
    if (old == compare) *address = v;
    return old;
}
inline void __threadfence() {}

inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }  // CUDA: 32 for 0
inline double __longlong_as_double(long long x) { return ::drmas_emu::from_bits<double>((uint64_t)x); }
inline long long __double_as_longlong(double x) { return (long long)::drmas_emu::to_bits(x); }
inline float __int_as_float(int x) { return ::drmas_emu::from_bits<float>((uint32_t)x); }
inline int __float_as_int(float x) { return (int)(uint32_t)::drmas_emu::to_bits(x); }
// Round-to-nearest products and sums, never contracted into an FMA (the build uses -ffp-contract=off).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
