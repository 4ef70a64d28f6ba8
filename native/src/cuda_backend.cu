// cuda_backend.cu — the CUDA backend: host launchers for the kernels of kernels/. Each call
// checks that its arrays are device memory of one device and runs on that device (a guard
// restores the caller's current device on every return path), validates the data on the device
// and synchronises `stream` once to report the first bad index (in the CPU backend's order and
// words) before any output is written; the clipped loss given host-validated offsets and the
// trusted advantages (which check rows inside the kernels instead) do not synchronise at all. Scratch memory is stream-ordered (cudaMallocAsync/cudaFreeAsync).
// Every CUDA error becomes a status with cudaGetErrorString; nothing exits or prints.
// The same file compiles as host C++ under the SIMT emulator of native/emu (launches go through
// DRMAS_LAUNCH), which is how the CI tests it.
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <algorithm>
#include <thread>

#include "backend.h"
#include "drmas_math.h"

#include "drmas_common.cuh"
#include "validate.cuh"
#include "segment_stats.cuh"
#include "advantage.cuh"
#include "broadcast_rows.cuh"
#include "clipped_loss.cuh"
#include "lmhead.cuh"

namespace drmas {
namespace {

using ull = unsigned long long;

// Grid-stride kernels never need more blocks than this to fill a GPU (132 SMs x 2048 threads
// on an H100 is ~1000 blocks of 256); more would only add scheduling overhead. Tests lower it
// with DRMAS_CUDA_MAX_GRID (read once) so that small inputs take several grid-stride iterations.
constexpr int64_t kMaxGrid = 8192;

int64_t max_grid() {
    static const int64_t cap = [] {
        const char* s = getenv("DRMAS_CUDA_MAX_GRID");
        const long long v = s != nullptr ? atoll(s) : 0;
        return v >= 1 && v <= kMaxGrid ? (int64_t)v : kMaxGrid;
    }();
    return cap;
}

int grid_for(int64_t items) {
    const int64_t blocks = (items + kBlockSize - 1) / kBlockSize;
    return (int)std::min<int64_t>(std::max<int64_t>(blocks, 1), max_grid());
}
// Kernels with one block per row.
int grid_for_rows(int64_t rows) { return (int)std::min<int64_t>(std::max<int64_t>(rows, 1), max_grid()); }

// A failed CUDA call: clear the (non-sticky) error state and report it.
int32_t cuda_fail(const char* fn, const char* what, cudaError_t e) {
    (void)cudaGetLastError();
    return fail(e == cudaErrorMemoryAllocation ? DRMAS_ERR_ALLOC : DRMAS_ERR_CUDA, "%s: %s (in %s)",
                fn, cudaGetErrorString(e), what);
}

#define DRMAS_CUDA_TRY(what, call)                               \
    do {                                                         \
        const cudaError_t drmas_e_ = (call);                     \
        if (drmas_e_ != cudaSuccess) return cuda_fail(fn, what, drmas_e_); \
    } while (0)

// After a launch: a bad configuration or a missing kernel image shows up here.
#define DRMAS_CUDA_LAUNCHED(kernel) DRMAS_CUDA_TRY(kernel, cudaGetLastError())

// The device a call runs on: the device of its arrays, which must all be memory of one device
// (managed memory runs on any). The call then runs with that device current, and the caller's
// current device is restored on every return path (as LibTorch's device guard does): rank r of a
// multi-GPU run hands us tensors of cuda:r while the thread's current device may be another,
// and scratch memory and launches must go to the arrays' device. Declare it before any Scratch,
// so that scratch is freed before the device is switched back.
class DeviceGuard {
public:
    DeviceGuard() = default;
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;
    ~DeviceGuard() {
        if (previous_ >= 0 && previous_ != device_) {
            (void)cudaSetDevice(previous_);
            (void)cudaGetLastError();
        }
    }

    // Checks that p (when not NULL) is device or managed memory, on the device of the arrays
    // added before it.
    int32_t add(const char* fn, const char* name, const void* p) {
        if (p == nullptr) return DRMAS_OK;
        cudaPointerAttributes attr;
        const cudaError_t e = cudaPointerGetAttributes(&attr, p);
        if (e == cudaErrorInvalidValue) {
            (void)cudaGetLastError();
            return fail(DRMAS_ERR_CONFIG,
                        "%s: argument '%s' is not a device pointer (CUDA calls need cudaMalloc'd or managed memory)",
                        fn, name);
        }
        if (e != cudaSuccess) return cuda_fail(fn, "cudaPointerGetAttributes", e);
        if (attr.type == cudaMemoryTypeManaged) return DRMAS_OK;
        if (attr.type != cudaMemoryTypeDevice)
            return fail(DRMAS_ERR_CONFIG,
                        "%s: argument '%s' is not a device pointer (it is %s memory; CUDA calls need cudaMalloc'd or managed memory)",
                        fn, name, attr.type == cudaMemoryTypeHost ? "pinned host" : "host");
        if (device_ < 0) {
            device_ = attr.device;
            first_ = name;
        } else if (attr.device != device_) {
            return fail(DRMAS_ERR_CONFIG,
                        "%s: argument '%s' is memory of device %d but '%s' is memory of device %d (the arrays of "
                        "one call must be on one device)",
                        fn, name, attr.device, first_, device_);
        }
        return DRMAS_OK;
    }

    // Makes the arrays' device current (after every add); with none but managed memory, the
    // current device stays.
    int32_t enter(const char* fn) {
        if (device_ < 0) return DRMAS_OK;
        int current = 0;
        DRMAS_CUDA_TRY("cudaGetDevice", cudaGetDevice(&current));
        if (current == device_) return DRMAS_OK;
        DRMAS_CUDA_TRY("cudaSetDevice", cudaSetDevice(device_));
        previous_ = current;
        return DRMAS_OK;
    }

private:
    int device_ = -1;
    const char* first_ = nullptr;
    int previous_ = -1;
};

#define DRMAS_CHECK_POINTER(name, ptr, used)                                   \
    do {                                                                       \
        if (used) {                                                            \
            if (int32_t drmas_st_ = guard.add(fn, name, ptr)) return drmas_st_; \
        }                                                                      \
    } while (0)

#define DRMAS_ENTER_DEVICE()                                                   \
    do {                                                                       \
        if (int32_t drmas_st_ = guard.enter(fn)) return drmas_st_;             \
    } while (0)

// One stream-ordered scratch allocation carved into aligned arrays. The destructor frees it
// on the stream on every path (error paths included); release() reports a failing free.
class Scratch {
public:
    explicit Scratch(cudaStream_t stream) : stream_(stream) {}
    ~Scratch() {
        if (base_ != nullptr) {
            (void)cudaFreeAsync(base_, stream_);
            (void)cudaGetLastError();
        }
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    // Reserves `count` elements of T; returns the byte offset (call before allocate()).
    template <class T>
    size_t reserve(int64_t count) {
        const size_t offset = (bytes_ + 255) / 256 * 256;
        bytes_ = offset + (size_t)count * sizeof(T);
        return offset;
    }
    size_t bytes() const { return bytes_; }
    cudaError_t allocate() {
        if (bytes_ == 0) return cudaSuccess;
        return cudaMallocAsync(&base_, bytes_, stream_);
    }
    template <class T>
    T* at(size_t offset) const {
        return reinterpret_cast<T*>(static_cast<char*>(base_) + offset);
    }
    cudaError_t release() {
        void* p = base_;
        base_ = nullptr;
        return p != nullptr ? cudaFreeAsync(p, stream_) : cudaSuccess;
    }

private:
    cudaStream_t stream_;
    void* base_ = nullptr;
    size_t bytes_ = 0;
};

// Copies `count` values from device memory to the host and waits for them (the one
// synchronisation of a call, or the extra ones of an error message).
template <class T>
cudaError_t copy_to_host(T* host, const T* device, int64_t count, cudaStream_t stream) {
    cudaError_t e = cudaMemcpyAsync(host, device, (size_t)count * sizeof(T), cudaMemcpyDefault, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    return e;
}

const char* finite_name(float v) { return isnan(v) ? "nan" : (v > 0 ? "+inf" : "-inf"); }

// Offsets: the CPU backend's checks and messages, from the slots of
// validate_row_offsets_kernel (already copied to the host).
int32_t report_offsets(const char* fn, const ull* slots, const int64_t* row_offsets,
                       int64_t num_rows, int64_t num_tokens, cudaStream_t stream) {
    const int64_t first = (int64_t)slots[kOffFirst];
    const int64_t last = (int64_t)slots[kOffLast];
    if (first < 0)
        return fail(DRMAS_ERR_RANGE, "%s: row_offsets[0] = %lld is negative", fn, (long long)first);
    if (slots[kOffDecreasing] != kNoError) {
        const int64_t r = (int64_t)slots[kOffDecreasing];  // r >= 1
        int64_t pair[2] = {0, 0};
        DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(pair, row_offsets + (r - 1), 2, stream));
        return fail(DRMAS_ERR_RANGE,
                    "%s: row_offsets[%lld] = %lld < row_offsets[%lld] = %lld (offsets must not decrease)",
                    fn, (long long)r, (long long)pair[1], (long long)(r - 1), (long long)pair[0]);
    }
    if (last > num_tokens)
        return fail(DRMAS_ERR_RANGE, "%s: row_offsets[%lld] = %lld is past num_tokens = %lld", fn,
                    (long long)num_rows, (long long)last, (long long)num_tokens);
    return DRMAS_OK;
}

// Runs validate_row_offsets_kernel and synchronises; on success gives the span
// [first, last) that the rows tile.
int32_t validate_offsets(const char* fn, int64_t num_rows, const int64_t* row_offsets,
                         int64_t num_tokens, cudaStream_t stream, int64_t* first, int64_t* last) {
    Scratch scratch(stream);
    const size_t slots_at = scratch.reserve<ull>(kOffSlots);
    DRMAS_CUDA_TRY("cudaMallocAsync", scratch.allocate());
    ull* slots = scratch.at<ull>(slots_at);
    DRMAS_CUDA_TRY("cudaMemsetAsync", cudaMemsetAsync(slots, 0xFF, kOffSlots * sizeof(ull), stream));
    DRMAS_LAUNCH(validate_row_offsets_kernel, grid_for(num_rows + 1), kBlockSize, 0, stream)(
        num_rows, row_offsets, slots);
    DRMAS_CUDA_LAUNCHED("validate_row_offsets_kernel");
    ull host[kOffSlots];
    DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(host, slots, kOffSlots, stream));
    DRMAS_CUDA_TRY("cudaFreeAsync", scratch.release());
    if (int32_t st = report_offsets(fn, host, row_offsets, num_rows, num_tokens, stream)) return st;
    *first = (int64_t)host[kOffFirst];
    *last = (int64_t)host[kOffLast];
    return DRMAS_OK;
}

// Zeroes the tokens of [0, first) and [last, num_tokens): those no row owns.
cudaError_t zero_outside_rows(float* tokens, int64_t first, int64_t last, int64_t num_tokens,
                              cudaStream_t stream) {
    cudaError_t e = cudaSuccess;
    if (first > 0) e = cudaMemsetAsync(tokens, 0, (size_t)first * sizeof(float), stream);
    if (e == cudaSuccess && last < num_tokens)
        e = cudaMemsetAsync(tokens + last, 0, (size_t)(num_tokens - last) * sizeof(float), stream);
    return e;
}

// An empty kernel, compiled into the same fatbin as every other kernel of this file: whether the
// runtime can load it on a device is whether the library has a kernel image for that device.
__global__ void probe_kernel() {}

// The architectures of that fatbin, for messages (CMakeLists.txt passes DRMAS_CUDA_ARCHITECTURES).
#if defined(DRMAS_CUDA_EMULATION)
const char* const kArchitectures = "emulated (compute capability 8.0 and newer, as 80-real,90-real,90-virtual)";
#elif defined(DRMAS_CUDA_ARCHS)
const char* const kArchitectures = DRMAS_CUDA_ARCHS;
#else
const char* const kArchitectures = "unknown";
#endif

}  // namespace

// ---------------------------------------------------------------------------------------
// availability and memory helpers

int32_t cuda_compiled() { return 1; }

// What the one probe of cuda_available() got from cudaGetDeviceCount (cudaSuccess with no device: count 0).
static cudaError_t g_probe_error = cudaSuccess;

int32_t cuda_available() {
    // Probed once: cudaGetDeviceCount loads the driver, and without one it only returns an
    // error (cudaErrorInsufficientDriver / cudaErrorNoDevice), which must not stay pending.
    static const int32_t available = [] {
        int count = 0;
        const cudaError_t e = cudaGetDeviceCount(&count);
        (void)cudaGetLastError();
        g_probe_error = e;
        return (e == cudaSuccess && count >= 1) ? 1 : 0;
    }();
    return available;
}

const char* cuda_unavailable_reason() {
    if (cuda_available()) return "";
    return g_probe_error == cudaSuccess ? "no CUDA-capable device is detected" : cudaGetErrorString(g_probe_error);
}

int32_t cuda_malloc(size_t bytes, void** ptr) {
    const char* fn = "drmas_cuda_malloc";
    *ptr = nullptr;
    DRMAS_CUDA_TRY("cudaMalloc", cudaMalloc(ptr, bytes));
    return DRMAS_OK;
}

int32_t cuda_free(void* ptr) {
    const char* fn = "drmas_cuda_free";
    DRMAS_CUDA_TRY("cudaFree", cudaFree(ptr));
    return DRMAS_OK;
}

int32_t cuda_memcpy(void* dst, const void* src, size_t bytes, int32_t kind) {
    const char* fn = "drmas_cuda_memcpy";
    if (bytes == 0) return DRMAS_OK;
    const cudaMemcpyKind k = kind == DRMAS_COPY_HOST_TO_DEVICE   ? cudaMemcpyHostToDevice
                             : kind == DRMAS_COPY_DEVICE_TO_HOST ? cudaMemcpyDeviceToHost
                                                                 : cudaMemcpyDeviceToDevice;
    DRMAS_CUDA_TRY("cudaMemcpy", cudaMemcpy(dst, src, bytes, k));
    return DRMAS_OK;
}

int32_t cuda_device_count() {
    if (!cuda_available()) return 0;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return count;
}

int32_t cuda_set_device(int32_t device) {
    const char* fn = "drmas_cuda_set_device";
    const int32_t count = cuda_device_count();
    if (device < 0 || device >= count)
        return fail(DRMAS_ERR_RANGE, "%s: device %d is not in [0, %d)", fn, device, count);
    DRMAS_CUDA_TRY("cudaSetDevice", cudaSetDevice(device));
    return DRMAS_OK;
}

int32_t cuda_check_device(int32_t device) {
    const char* fn = "drmas_cuda_check_device";
    const int32_t count = cuda_device_count();
    if (device < 0 || device >= count)
        return fail(DRMAS_ERR_RANGE, "%s: device %d is not in [0, %d)", fn, device, count);
    int major = 0, minor = 0;
    DRMAS_CUDA_TRY("cudaDeviceGetAttribute", cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    DRMAS_CUDA_TRY("cudaDeviceGetAttribute", cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    // cudaFuncGetAttributes asks about the current device: a thread of its own makes `device` current for
    // the question, so that the caller's thread is left as it was. Switching it there and back made
    // its previous device current again, and on a thread that had not used one yet (device 0 by
    // default) that created a CUDA context on GPU 0: every rank of a node checking its own GPU put
    // one there, hundreds of MiB each.
    cudaError_t e = cudaSuccess, set = cudaSuccess;
    std::thread probe([&] {
        set = cudaSetDevice(device);
        if (set != cudaSuccess) return;
        cudaFuncAttributes attr;
        e = cudaFuncGetAttributes(&attr, probe_kernel);
        (void)cudaGetLastError();
    });
    probe.join();
    if (set != cudaSuccess) return cuda_fail(fn, "cudaSetDevice", set);
    if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction) {
        return fail(DRMAS_ERR_UNSUPPORTED,
                    "%s: libdrmas has no CUDA kernel image for device %d (compute capability %d.%d: %s); it was "
                    "compiled for the architectures %s: rebuild it with %d%d-real added to CMake's DRMAS_CUDA_ARCHITECTURES "
                    "(README, \"Installing on a GPU server\")",
                    fn, device, major, minor, cudaGetErrorString(e), kArchitectures, major, minor);
    }
    if (e != cudaSuccess) return cuda_fail(fn, "cudaFuncGetAttributes", e);
    return DRMAS_OK;
}

int32_t cuda_get_device(int32_t* device) {
    const char* fn = "drmas_cuda_get_device";
    int d = 0;
    DRMAS_CUDA_TRY("cudaGetDevice", cudaGetDevice(&d));
    *device = d;
    return DRMAS_OK;
}

int32_t cuda_synchronize(void* stream) {
    const char* fn = "drmas_cuda_synchronize";
    DRMAS_CUDA_TRY("cudaStreamSynchronize", cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    return DRMAS_OK;
}

// ---------------------------------------------------------------------------------------
// 1. segment statistics

int32_t segment_stats_cuda(int64_t n, const float* values, const int32_t* ids,
                           int64_t num_segments, int32_t ddof, int64_t* count, double* mean,
                           double* m2, double* std, void* stream_ptr) {
    const char* fn = "drmas_segment_stats_f32";
    const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    (void)cudaGetLastError();  // an earlier, unrelated launch error must not be blamed on us
    DeviceGuard guard;
    DRMAS_CHECK_POINTER("values", values, n > 0);
    DRMAS_CHECK_POINTER("segment_ids", ids, n > 0);
    DRMAS_CHECK_POINTER("count", count, num_segments > 0);
    DRMAS_CHECK_POINTER("mean", mean, num_segments > 0);
    DRMAS_CHECK_POINTER("m2", m2, num_segments > 0);
    DRMAS_CHECK_POINTER("std", std, num_segments > 0);
    DRMAS_ENTER_DEVICE();
    if (num_segments == 0) return DRMAS_OK;  // then n == 0 too (api.cpp)

    // Validation: per row the CPU checks the id, then the value, and stops at the first
    // bad row; so the first offending row is the lower of the two first-bad indices, and on
    // a tie the id is reported.
    if (n > 0) {
        Scratch scratch(stream);
        const size_t bad_at = scratch.reserve<ull>(kSegChecks);
        DRMAS_CUDA_TRY("cudaMallocAsync", scratch.allocate());
        ull* bad = scratch.at<ull>(bad_at);
        DRMAS_CUDA_TRY("cudaMemsetAsync", cudaMemsetAsync(bad, 0xFF, kSegChecks * sizeof(ull), stream));
        DRMAS_LAUNCH(validate_segment_rows_kernel, grid_for(n), kBlockSize, 0, stream)(n, values, ids,
                                                                              num_segments, bad);
        DRMAS_CUDA_LAUNCHED("validate_segment_rows_kernel");
        ull host[kSegChecks];
        DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(host, bad, kSegChecks, stream));
        DRMAS_CUDA_TRY("cudaFreeAsync", scratch.release());
        if (host[kSegBadId] != kNoError && host[kSegBadId] <= host[kSegBadValue]) {
            const int64_t i = (int64_t)host[kSegBadId];
            int32_t id = 0;
            DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&id, ids + i, 1, stream));
            return fail(DRMAS_ERR_RANGE, "%s: segment_ids[%lld] = %d is outside [0, %lld)", fn,
                        (long long)i, id, (long long)num_segments);
        }
        if (host[kSegBadValue] != kNoError) {
            const int64_t i = (int64_t)host[kSegBadValue];
            float v = 0.0f;
            DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&v, values + i, 1, stream));
            return fail(DRMAS_ERR_NONFINITE, "%s: values[%lld] is not finite (%s)", fn,
                        (long long)i, finite_name(v));
        }
    }

    // The outputs are the accumulators: count and mean (holding the sums until
    // segment_means_kernel) for pass 1, m2 for pass 2. int64 and unsigned long long have
    // the same size and, for counts < 2^63, the same bits.
    ull* cnt = reinterpret_cast<ull*>(count);
    DRMAS_CUDA_TRY("cudaMemsetAsync", cudaMemsetAsync(count, 0, (size_t)num_segments * sizeof(int64_t), stream));
    DRMAS_CUDA_TRY("cudaMemsetAsync", cudaMemsetAsync(mean, 0, (size_t)num_segments * sizeof(double), stream));
    DRMAS_CUDA_TRY("cudaMemsetAsync", cudaMemsetAsync(m2, 0, (size_t)num_segments * sizeof(double), stream));
    if (n > 0) {
        DRMAS_LAUNCH(segment_sums_kernel, grid_for(n), kBlockSize, 0, stream)(n, values, ids, cnt, mean);
        DRMAS_CUDA_LAUNCHED("segment_sums_kernel");
        DRMAS_LAUNCH(segment_means_kernel, grid_for(num_segments), kBlockSize, 0, stream)(nullptr, num_segments, cnt, mean);
        DRMAS_CUDA_LAUNCHED("segment_means_kernel");
        DRMAS_LAUNCH(segment_m2_kernel, grid_for(n), kBlockSize, 0, stream)(n, values, ids, mean, m2);
        DRMAS_CUDA_LAUNCHED("segment_m2_kernel");
    }
    if (std != nullptr) {
        DRMAS_LAUNCH(segment_std_kernel, grid_for(num_segments), kBlockSize, 0, stream)(num_segments, cnt, m2,
                                                                               ddof, std);
        DRMAS_CUDA_LAUNCHED("segment_std_kernel");
    }
    return DRMAS_OK;
}

// ---------------------------------------------------------------------------------------
// 2. advantages

int32_t advantage_cuda(const drmas_norm_config& cfg, int64_t n, const float* scores,
                       const int32_t* uid, const int32_t* traj, const int32_t* agent,
                       int64_t num_uids, int64_t num_trajs, int64_t num_agents,
                       float* advantages, double* diagnostics, void* stream_ptr, bool trusted) {
    // Sorted rows (as rollouts write them) are normalised by advantage_sorted_kernel in one pass;
    // rows in another order, a uid run longer than kSortedLongRun, more agents than its lanes hold,
    // or diagnostics take the multi-kernel path (atomics into per-segment accumulators, two passes
    // over the rows).
    // validated: the validation kernel also finds whether the rows are sorted in short enough runs,
    //   and the one synchronisation of the call picks the path on the host.
    // trusted: no validation launches, no read-back, no synchronisation. The one-pass kernel checks
    //   the order and the ids of every tile; where any tile fails it opens a gate in scratch, and
    //   the multi-kernel path queued behind it (each launch gated: an empty launch while the gate is
    //   closed) then recomputes every advantage, skipping rows with an id out of range (RowIds) as
    //   before, so that bad input cannot touch memory outside the arrays and its bad rows are NaN.
    const char* fn = trusted ? "drmas_advantage_trusted_f32" : "drmas_advantage_f32";
    const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    (void)cudaGetLastError();
    const bool by_traj = traj != nullptr;  // api.cpp passes NULL under row pooling
    const int64_t U = num_uids, T = by_traj ? num_trajs : 0, K = num_agents;
    const int64_t S = U * K;
    DeviceGuard guard;
    DRMAS_CHECK_POINTER("scores", scores, n > 0);
    DRMAS_CHECK_POINTER("uid", uid, n > 0);
    DRMAS_CHECK_POINTER("traj", traj, n > 0);
    DRMAS_CHECK_POINTER("agent", agent, n > 0);
    DRMAS_CHECK_POINTER("advantages", advantages, n > 0);
    DRMAS_CHECK_POINTER("diagnostics", diagnostics, S > 0);
    DRMAS_ENTER_DEVICE();
    const bool want_diag = diagnostics != nullptr && S > 0;
    if (n == 0 && !want_diag) return DRMAS_OK;
    // The one-pass kernel can take the call (if the rows turn out sorted).
    const bool one_pass = n > 0 && !want_diag && K <= kSortedMaxAgents;

    // Scratch: check slots and trajectory first rows (preset to all ones), then the
    // accumulators (preset to zero).
    Scratch scratch(stream);
    const size_t bad_at = scratch.reserve<ull>(kAdvChecks);
    const size_t first_row_at = scratch.reserve<ull>(T);
    const size_t ones_end = scratch.bytes();
    const size_t agent_count_at = scratch.reserve<ull>(S);
    const size_t agent_mean_at = scratch.reserve<double>(S);
    const size_t agent_m2_at = scratch.reserve<double>(S);
    const size_t group_count_at = scratch.reserve<ull>(U);
    const size_t group_mean_at = scratch.reserve<double>(U);
    const size_t group_m2_at = scratch.reserve<double>(U);
    const size_t traj_count_at = scratch.reserve<ull>(T);
    const size_t traj_mean_at = scratch.reserve<double>(T);
    const size_t zeros_end = scratch.bytes();
    DRMAS_CUDA_TRY("cudaMallocAsync", scratch.allocate());
    ull* bad = scratch.at<ull>(bad_at);
    ull* first_row = scratch.at<ull>(first_row_at);
    const SegmentAccumulators agents{scratch.at<ull>(agent_count_at), scratch.at<double>(agent_mean_at),
                                     scratch.at<double>(agent_m2_at)};
    const SegmentAccumulators groups{scratch.at<ull>(group_count_at), scratch.at<double>(group_mean_at),
                                     scratch.at<double>(group_m2_at)};
    const SegmentAccumulators trajs{scratch.at<ull>(traj_count_at), scratch.at<double>(traj_mean_at),
                                    nullptr};
    const ConstSegmentAccumulators agents_c{agents.count, agents.mean, agents.m2};
    const ConstSegmentAccumulators groups_c{groups.count, groups.mean, groups.m2};
    const ConstSegmentAccumulators trajs_c{trajs.count, trajs.mean, trajs.m2};
    // The gate of the gated launches: the "not sorted" slot (kNoError: sorted, the gated kernels
    // return at once). NULL: they always run.
    ull* const unsorted = bad + kAdvUnsorted;
    const ull* gate = nullptr;
    auto launch_one_pass = [&]() {
        DRMAS_LAUNCH(advantage_sorted_kernel, grid_for((n + kSortedTileRows - 1) / kSortedTileRows * 32), kBlockSize, 0,
                     stream)(cfg, n, scores, uid, traj, agent, U, T, K, advantages, unsorted);
    };
    // the scratch's presets: all ones up to ones_end (check slots, first rows), zeros after it
    auto preset_ones = [&]() { return cudaMemsetAsync(scratch.at<char>(0), 0xFF, ones_end, stream); };
    auto preset_zeros = [&]() { return cudaMemsetAsync(scratch.at<char>(ones_end), 0, zeros_end - ones_end, stream); };
    // The trajectory map (first rows) is built in the fallback unless validation built it.
    bool have_first_rows = false;

    // ---- validation ----
    // The CPU checks each row's uid, traj, agent and score in that order and stops at the
    // first bad row `limit`; before reporting it, it scans rows [0, limit) for the first row
    // whose trajectory its first row put in another uid, and reports that one first.
    if (trusted) {
        if (one_pass) {
            DRMAS_CUDA_TRY("cudaMemsetAsync", cudaMemsetAsync(unsorted, 0xFF, sizeof(ull), stream));
            launch_one_pass();
            DRMAS_CUDA_LAUNCHED("advantage_sorted_kernel");
            gate = unsorted;
            // the fallback's set-up, as a gated kernel (a memset cannot wait for the verdict)
            const int64_t ones = (int64_t)((ones_end - first_row_at) / sizeof(ull));
            const int64_t zeros = (int64_t)((zeros_end - ones_end) / sizeof(ull));
            DRMAS_LAUNCH(advantage_fill_kernel, grid_for(ones + zeros), kBlockSize, 0, stream)(gate, first_row, ones,
                                                                                                 scratch.at<ull>(ones_end), zeros);
            DRMAS_CUDA_LAUNCHED("advantage_fill_kernel");
        } else {
            DRMAS_CUDA_TRY("cudaMemsetAsync", preset_ones());
            DRMAS_CUDA_TRY("cudaMemsetAsync", preset_zeros());
        }
    } else if (n > 0) {
        DRMAS_CUDA_TRY("cudaMemsetAsync", cudaMemsetAsync(bad, 0xFF, kAdvChecks * sizeof(ull), stream));
        DRMAS_LAUNCH(validate_advantage_rows_kernel, grid_for(n), kBlockSize, 0, stream)(
            n, scores, uid, traj, agent, U, T, K, bad);
        DRMAS_CUDA_LAUNCHED("validate_advantage_rows_kernel");
        if (by_traj) {
            // Sorted rows cannot put a trajectory in two uids: where the one-pass kernel can take
            // them, the map and the consistency check wait for the verdict (gated).
            const ull* check_gate = one_pass ? unsorted : nullptr;
            const int64_t ones = (int64_t)((ones_end - first_row_at) / sizeof(ull));
            DRMAS_LAUNCH(advantage_fill_kernel, grid_for(ones), kBlockSize, 0, stream)(check_gate, first_row, ones,
                                                                                         (ull*)nullptr, (int64_t)0);
            DRMAS_CUDA_LAUNCHED("advantage_fill_kernel");
            DRMAS_LAUNCH(trajectory_first_row_kernel, grid_for(n), kBlockSize, 0, stream)(check_gate, n, uid, traj, U, T,
                                                                                          first_row);
            DRMAS_CUDA_LAUNCHED("trajectory_first_row_kernel");
            DRMAS_LAUNCH(trajectory_consistency_kernel, grid_for(n), kBlockSize, 0, stream)(
                check_gate, n, uid, traj, U, T, first_row, bad);
            DRMAS_CUDA_LAUNCHED("trajectory_consistency_kernel");
        }
        ull host[kAdvChecks];
        DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(host, bad, kAdvChecks, stream));
        int64_t limit = n;
        int kind = -1;
        for (int k = kAdvBadUid; k <= kAdvBadScore; ++k)
            if (host[k] != kNoError && (int64_t)host[k] < limit) {
                limit = (int64_t)host[k];
                kind = k;
            }
        // Rows below `limit` are all in range, so their first rows and the first
        // inconsistent one are those of the CPU's sequential scan. (Where the check was gated
        // off, rows [0, n) are in sorted order and hold no inconsistent row.)
        if (by_traj && host[kAdvInconsistent] != kNoError && (int64_t)host[kAdvInconsistent] < limit) {
            const int64_t i = (int64_t)host[kAdvInconsistent];
            int32_t t = 0, u = 0, owner = 0;
            ull f = 0;
            DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&t, traj + i, 1, stream));
            DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&u, uid + i, 1, stream));
            DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&f, first_row + t, 1, stream));
            DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&owner, uid + f, 1, stream));
            return fail(DRMAS_ERR_INCONSISTENT,
                        "%s: traj[%lld] = %d has uid %d but its row %lld has uid %d (a trajectory must lie in one uid)",
                        fn, (long long)i, t, u, (long long)f, owner);
        }
        if (kind >= 0) {
            const long long i = (long long)limit;
            int32_t id = 0;
            switch (kind) {
                case kAdvBadUid:
                    DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&id, uid + i, 1, stream));
                    return fail(DRMAS_ERR_RANGE, "%s: uid[%lld] = %d is outside [0, %lld)", fn, i, id, (long long)U);
                case kAdvBadTraj:
                    DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&id, traj + i, 1, stream));
                    return fail(DRMAS_ERR_RANGE, "%s: traj[%lld] = %d is outside [0, %lld)", fn, i, id, (long long)T);
                case kAdvBadAgent:
                    DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&id, agent + i, 1, stream));
                    return fail(DRMAS_ERR_RANGE, "%s: agent[%lld] = %d is outside [0, %lld)", fn, i, id, (long long)K);
                default: {
                    float v = 0.0f;
                    DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&v, scores + i, 1, stream));
                    return fail(DRMAS_ERR_NONFINITE, "%s: scores[%lld] is not finite (%s)", fn, i, finite_name(v));
                }
            }
        }
        const bool sorted = host[kAdvUnsorted] == kNoError;
        if (one_pass && sorted) {
            launch_one_pass();
            DRMAS_CUDA_LAUNCHED("advantage_sorted_kernel");
            DRMAS_CUDA_TRY("cudaFreeAsync", scratch.release());
            return DRMAS_OK;
        }
        have_first_rows = by_traj;  // the map ran (its gate stayed open: the rows are not sorted)
        // the accumulators (the first rows are set already, where there are trajectories)
        DRMAS_CUDA_TRY("cudaMemsetAsync", preset_zeros());
    } else {  // no rows, diagnostics only
        DRMAS_CUDA_TRY("cudaMemsetAsync", preset_ones());
        DRMAS_CUDA_TRY("cudaMemsetAsync", preset_zeros());
    }

    // ---- the multi-kernel path: two passes, fp64 atomics ----
    if (n > 0) {
        if (by_traj && !have_first_rows) {
            // The statistics need each trajectory's first row (its group); nothing is checked.
            DRMAS_LAUNCH(trajectory_first_row_kernel, grid_for(n), kBlockSize, 0, stream)(gate, n, uid, traj, U, T, first_row);
            DRMAS_CUDA_LAUNCHED("trajectory_first_row_kernel");
        }
        DRMAS_LAUNCH(advantage_sums_kernel, grid_for(n), kBlockSize, 0, stream)(gate, n, scores, uid, traj, agent, U, T, K,
                                                                                agents, groups, trajs);
        DRMAS_CUDA_LAUNCHED("advantage_sums_kernel");
        DRMAS_LAUNCH(segment_means_kernel, grid_for(S), kBlockSize, 0, stream)(gate, S, agents.count, agents.mean);
        DRMAS_CUDA_LAUNCHED("segment_means_kernel");
        if (by_traj) {
            DRMAS_LAUNCH(segment_means_kernel, grid_for(T), kBlockSize, 0, stream)(gate, T, trajs.count, trajs.mean);
            DRMAS_CUDA_LAUNCHED("segment_means_kernel");
            DRMAS_LAUNCH(trajectory_group_sums_kernel, grid_for(T), kBlockSize, 0, stream)(gate, T, trajs_c, first_row, uid,
                                                                                           U, groups);
            DRMAS_CUDA_LAUNCHED("trajectory_group_sums_kernel");
        }
        DRMAS_LAUNCH(segment_means_kernel, grid_for(U), kBlockSize, 0, stream)(gate, U, groups.count, groups.mean);
        DRMAS_CUDA_LAUNCHED("segment_means_kernel");
        DRMAS_LAUNCH(advantage_m2_kernel, grid_for(n), kBlockSize, 0, stream)(gate, n, scores, uid, traj, agent, U, T, K,
                                                                              agents, groups);
        DRMAS_CUDA_LAUNCHED("advantage_m2_kernel");
        if (by_traj) {
            DRMAS_LAUNCH(trajectory_group_m2_kernel, grid_for(T), kBlockSize, 0, stream)(gate, T, trajs_c, first_row, uid, U,
                                                                                         groups);
            DRMAS_CUDA_LAUNCHED("trajectory_group_m2_kernel");
        }
        DRMAS_LAUNCH(advantage_kernel, grid_for(n), kBlockSize, 0, stream)(gate, cfg, n, scores, uid, traj, agent, U, T, K,
                                                                           agents_c, groups_c, trajs_c, advantages);
        DRMAS_CUDA_LAUNCHED("advantage_kernel");
    }
    if (want_diag) {
        DRMAS_LAUNCH(advantage_diagnostics_kernel, grid_for(S), kBlockSize, 0, stream)(U, K, cfg.ddof, agents_c,
                                                                             groups_c, diagnostics);
        DRMAS_CUDA_LAUNCHED("advantage_diagnostics_kernel");
    }
    DRMAS_CUDA_TRY("cudaFreeAsync", scratch.release());
    return DRMAS_OK;
}

// ---------------------------------------------------------------------------------------
// 3. broadcast

int32_t broadcast_rows_cuda(int64_t num_rows, const float* row_values, const int64_t* row_offsets,
                            int64_t num_tokens, float* token_values, void* stream_ptr) {
    const char* fn = "drmas_broadcast_rows_f32";
    const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    (void)cudaGetLastError();
    DeviceGuard guard;
    DRMAS_CHECK_POINTER("row_values", row_values, num_rows > 0);
    DRMAS_CHECK_POINTER("row_offsets", row_offsets, true);
    DRMAS_CHECK_POINTER("token_values", token_values, num_tokens > 0);
    DRMAS_ENTER_DEVICE();
    int64_t first = 0, last = 0;
    if (int32_t st = validate_offsets(fn, num_rows, row_offsets, num_tokens, stream, &first, &last))
        return st;
    if (num_tokens == 0) return DRMAS_OK;
    DRMAS_CUDA_TRY("cudaMemsetAsync", zero_outside_rows(token_values, first, last, num_tokens, stream));
    if (num_rows > 0 && last > first) {
        DRMAS_LAUNCH(broadcast_rows_kernel, grid_for_rows(num_rows), kBlockSize, 0, stream)(
            num_rows, row_values, row_offsets, token_values);
        DRMAS_CUDA_LAUNCHED("broadcast_rows_kernel");
    }
    return DRMAS_OK;
}

// ---------------------------------------------------------------------------------------
// 4. fused clipped loss

int32_t clipped_loss_cuda(const drmas_loss_config& cfg, int64_t num_rows,
                          const int64_t* host_row_offsets, const int64_t* row_offsets,
                          int64_t num_tokens, const float* logp, const float* old_logp,
                          const float* advantages, const float* ref_logp, const uint8_t* mask,
                          float* grad, double* sums, void* stream_ptr, bool per_row) {
    const char* fn = per_row ? "drmas_clipped_loss_rows_f32"
                             : host_row_offsets != nullptr ? "drmas_clipped_loss_async_f32" : "drmas_clipped_loss_f32";
    const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    (void)cudaGetLastError();
    DeviceGuard guard;
    DRMAS_CHECK_POINTER("row_offsets", row_offsets, true);
    DRMAS_CHECK_POINTER("logp", logp, num_tokens > 0);
    DRMAS_CHECK_POINTER("old_logp", old_logp, num_tokens > 0);
    DRMAS_CHECK_POINTER("advantages", advantages, num_tokens > 0);
    DRMAS_CHECK_POINTER("ref_logp", ref_logp, num_tokens > 0);
    DRMAS_CHECK_POINTER("mask", mask, num_tokens > 0);
    DRMAS_CHECK_POINTER("grad", grad, num_tokens > 0);
    DRMAS_CHECK_POINTER("sums", sums, true);
    DRMAS_ENTER_DEVICE();
    int64_t first = 0, last = 0;
    if (host_row_offsets != nullptr) {
        // validated on the host by the caller (api.cpp): no read-back, no synchronisation
        first = host_row_offsets[0];
        last = host_row_offsets[num_rows];
    } else if (int32_t st = validate_offsets(fn, num_rows, row_offsets, num_tokens, stream, &first, &last)) {
        return st;
    }

    // One launch: the rows, then the last block's reduction (clipped_loss_kernel); its block
    // counter lives in this call's scratch, so concurrent calls on other streams cannot share it.
    Scratch scratch(stream);
    const size_t partials_at = scratch.reserve<double>((int64_t)DRMAS_LOSS_SUMS * num_rows);
    const size_t done_at = scratch.reserve<unsigned>(1);
    DRMAS_CUDA_TRY("cudaMallocAsync", scratch.allocate());
    double* partials = num_rows > 0 ? scratch.at<double>(partials_at) : nullptr;
    unsigned* blocks_done = scratch.at<unsigned>(done_at);
    DRMAS_CUDA_TRY("cudaMemsetAsync", cudaMemsetAsync(blocks_done, 0, sizeof(unsigned), stream));
    if (num_tokens > 0)
        DRMAS_CUDA_TRY("cudaMemsetAsync", zero_outside_rows(grad, first, last, num_tokens, stream));
    const int row_grid = grid_for_rows((num_rows + kWarpsPerBlock - 1) / kWarpsPerBlock);  // a warp a row
    if (per_row)
        DRMAS_LAUNCH(clipped_loss_kernel<AdvantagePerRow>, row_grid, kBlockSize, 0, stream)(
            cfg, num_rows, num_tokens, row_offsets, logp, old_logp, AdvantagePerRow{advantages}, ref_logp, mask, grad, partials,
            blocks_done, sums);
    else
        DRMAS_LAUNCH(clipped_loss_kernel<AdvantagePerToken>, row_grid, kBlockSize, 0, stream)(
            cfg, num_rows, num_tokens, row_offsets, logp, old_logp, AdvantagePerToken{advantages}, ref_logp, mask, grad, partials,
            blocks_done, sums);
    DRMAS_CUDA_LAUNCHED("clipped_loss_kernel");
    DRMAS_CUDA_TRY("cudaFreeAsync", scratch.release());
    return DRMAS_OK;
}

// ---------------------------------------------------------------------------------------
// 5. fused LM head

namespace {

// The statistics kernel of each logits type (two plain kernels: see lmhead_stats_block).
void launch_lmhead_stats(int64_t n, int64_t V, const float* logits, const int64_t* targets, LmHeadValid valid, float* lse,
                         float* ent, float* lp, ull* slots, cudaStream_t stream) {
    DRMAS_LAUNCH(lmhead_stats_kernel, grid_for_rows(n), kBlockSize, 0, stream)(n, V, logits, targets, valid, lse, ent, lp, slots);
}
void launch_lmhead_stats(int64_t n, int64_t V, const uint16_t* logits, const int64_t* targets, LmHeadValid valid, float* lse,
                         float* ent, float* lp, ull* slots, cudaStream_t stream) {
    DRMAS_LAUNCH(lmhead_stats_bf16_kernel, grid_for_rows(n), kBlockSize, 0, stream)(n, V, logits, targets, valid, lse, ent, lp,
                                                                                     slots);
}

// Softmax statistics of the chunk's valid tokens into scratch (lse, entropy, logp), then the
// first bad target or non-finite logit reported as the CPU backend words it (one synchronisation).
// With `deferred` the slots are the caller's (drmas_lmhead_chunk_async_*): left on the device, no wait.
template <class L>
int32_t lmhead_stats(const char* fn, int64_t n, int64_t V, const L* logits, const int64_t* targets, LmHeadValid valid,
                     float* lse, float* ent, float* lp, ull* slots, bool chunk, cudaStream_t stream, bool deferred = false) {
    DRMAS_CUDA_TRY("cudaMemsetAsync", cudaMemsetAsync(slots, 0xFF, 2 * sizeof(ull), stream));
    if (n > 0) {
        launch_lmhead_stats(n, V, logits, targets, valid, lse, ent, lp, slots, stream);
        DRMAS_CUDA_LAUNCHED("lmhead_stats_kernel");
    }
    if (deferred) return DRMAS_OK;
    ull host[2];
    DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(host, slots, 2, stream));
    if (host[0] != kNoError) {
        const int64_t t = valid.c0 + (int64_t)host[0];
        int64_t y = 0;
        DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&y, targets + t, 1, stream));
        if (chunk)
            return fail(DRMAS_ERR_RANGE, "%s: targets[%lld] = %lld (a valid token of the chunk) is outside the vocabulary [0, %lld)",
                        fn, (long long)t, (long long)y, (long long)V);
        return fail(DRMAS_ERR_RANGE, "%s: targets[%lld] = %lld is outside the vocabulary [0, %lld)", fn, (long long)t,
                    (long long)y, (long long)V);
    }
    if (host[1] != kNoError) {
        const int64_t bt = (int64_t)(host[1] / (ull)V), bv = (int64_t)(host[1] % (ull)V);
        L x{};
        DRMAS_CUDA_TRY("cudaMemcpyAsync", copy_to_host(&x, logits + host[1], 1, stream));
        return fail(DRMAS_ERR_NONFINITE, "%s: logits[%lld][%lld] (token %lld, vocabulary index %lld) is %s", fn, (long long)bt,
                    (long long)bv, (long long)(valid.c0 + bt), (long long)bv, finite_name(logit_value(x)));
    }
    return DRMAS_OK;
}

template <class L>
int32_t lmhead_logprobs_any(const char* fn, int64_t n, int64_t V, const L* logits, const int64_t* targets, float* logp,
                            float* entropy, uint64_t* errors, void* stream_ptr) {
    const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    (void)cudaGetLastError();
    DeviceGuard guard;
    DRMAS_CHECK_POINTER("logits", logits, n > 0);
    DRMAS_CHECK_POINTER("targets", targets, n > 0);
    DRMAS_CHECK_POINTER("logp", logp, n > 0);
    DRMAS_CHECK_POINTER("entropy", entropy, n > 0);
    const bool deferred = errors != nullptr;  // drmas_lmhead_logprobs_async_*: no synchronisation
    DRMAS_CHECK_POINTER("errors", errors, deferred);
    DRMAS_ENTER_DEVICE();
    Scratch scratch(stream);
    const size_t lse_at = scratch.reserve<float>(n), ent_at = scratch.reserve<float>(n), lp_at = scratch.reserve<float>(n);
    const size_t slots_at = scratch.reserve<ull>(2);
    DRMAS_CUDA_TRY("cudaMallocAsync", scratch.allocate());
    float *lse = scratch.at<float>(lse_at), *ent = scratch.at<float>(ent_at), *lp = scratch.at<float>(lp_at);
    ull* slots = deferred ? reinterpret_cast<ull*>(errors) : scratch.at<ull>(slots_at);
    if (int32_t st = lmhead_stats(fn, n, V, logits, targets, LmHeadValid{0, 0, n, nullptr}, lse, ent, lp, slots, false, stream,
                                  deferred))
        return st;
    if (n > 0) {
        DRMAS_CUDA_TRY("cudaMemcpyAsync", cudaMemcpyAsync(logp, lp, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        if (entropy)
            DRMAS_CUDA_TRY("cudaMemcpyAsync", cudaMemcpyAsync(entropy, ent, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    }
    DRMAS_CUDA_TRY("cudaFreeAsync", scratch.release());
    return DRMAS_OK;
}

template <class L>
int32_t lmhead_chunk_any(const char* fn, const drmas_lmhead_config& c, int64_t num_rows, const int64_t* host_row_offsets,
                         const int64_t* row_offsets, int64_t num_tokens, int64_t c0, int64_t n, int64_t V, L* logits,
                         const int64_t* targets, const float* old_logp, const float* advantages, const float* ref_logp,
                         const uint8_t* mask, float* logp_out, float* ent_out, double* sums, uint64_t* errors,
                         void* stream_ptr) {
    const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    (void)cudaGetLastError();
    DeviceGuard guard;
    DRMAS_CHECK_POINTER("row_offsets", row_offsets, true);
    DRMAS_CHECK_POINTER("logits", logits, n > 0);
    DRMAS_CHECK_POINTER("targets", targets, num_tokens > 0);
    DRMAS_CHECK_POINTER("old_logp", old_logp, num_tokens > 0);
    DRMAS_CHECK_POINTER("advantages", advantages, num_rows > 0);
    DRMAS_CHECK_POINTER("ref_logp", ref_logp, num_tokens > 0);
    DRMAS_CHECK_POINTER("mask", mask, num_tokens > 0);
    DRMAS_CHECK_POINTER("logp", logp_out, n > 0);
    DRMAS_CHECK_POINTER("entropy", ent_out, n > 0);
    DRMAS_CHECK_POINTER("sums", sums, true);
    const bool deferred = errors != nullptr;  // drmas_lmhead_chunk_async_*: no synchronisation
    DRMAS_CHECK_POINTER("errors", errors, deferred);
    DRMAS_ENTER_DEVICE();
    int64_t first = 0, last = 0;
    if (host_row_offsets != nullptr) {
        // validated on the host by the caller (api.cpp): no read-back, no synchronisation
        first = host_row_offsets[0];
        last = host_row_offsets[num_rows];
    } else if (int32_t st = validate_offsets(fn, num_rows, row_offsets, num_tokens, stream, &first, &last)) {
        return st;
    }
    Scratch scratch(stream);
    const size_t lse_at = scratch.reserve<float>(n), ent_at = scratch.reserve<float>(n), lp_at = scratch.reserve<float>(n);
    const size_t g_at = scratch.reserve<float>(n), slots_at = scratch.reserve<ull>(2);
    const size_t partials_at = scratch.reserve<double>((int64_t)DRMAS_LOSS_SUMS * num_rows);
    DRMAS_CUDA_TRY("cudaMallocAsync", scratch.allocate());
    float *lse = scratch.at<float>(lse_at), *ent = scratch.at<float>(ent_at), *lp = scratch.at<float>(lp_at);
    float* g = scratch.at<float>(g_at);
    double* partials = num_rows > 0 ? scratch.at<double>(partials_at) : nullptr;
    const LmHeadValid valid{c0, first, last, mask};
    ull* slots = deferred ? reinterpret_cast<ull*>(errors) : scratch.at<ull>(slots_at);
    if (int32_t st = lmhead_stats(fn, n, V, logits, targets, valid, lse, ent, lp, slots, true, stream, deferred)) return st;
    // valid from here on (deferred: whatever the caller's errors will say; the kernels stay inside the arrays)
    const drmas_loss_config lc{c.clip_low, c.clip_high, c.dual_clip, c.kl_coef, c.normalizer, c.kl_type, c.per_row_mean};
    if (n > 0) DRMAS_CUDA_TRY("cudaMemsetAsync", cudaMemsetAsync(g, 0, (size_t)n * sizeof(float), stream));
    if (num_rows > 0) {
        DRMAS_LAUNCH(lmhead_loss_kernel, grid_for_rows(num_rows), kBlockSize, 0, stream)(
            lc, num_rows, num_tokens, row_offsets, c0, c0 + n, lp, old_logp, advantages, ref_logp, mask, g, partials);
        DRMAS_CUDA_LAUNCHED("lmhead_loss_kernel");
    }
    DRMAS_LAUNCH(clipped_loss_reduce_kernel, 1, kBlockSize, 0, stream)(num_rows, partials, sums);
    DRMAS_CUDA_LAUNCHED("clipped_loss_reduce_kernel");
    DRMAS_LAUNCH(lmhead_entropy_sum_kernel, 1, kBlockSize, 0, stream)(n, ent, sums);
    DRMAS_CUDA_LAUNCHED("lmhead_entropy_sum_kernel");
    if (n > 0) {
        DRMAS_LAUNCH(lmhead_grad_kernel<L>, grid_for_rows(n), kBlockSize, 0, stream)(n, V, logits, targets, valid, lse, ent, g,
                                                                                      (float)c.entropy_coef);
        DRMAS_CUDA_LAUNCHED("lmhead_grad_kernel");
        if (logp_out)
            DRMAS_CUDA_TRY("cudaMemcpyAsync", cudaMemcpyAsync(logp_out, lp, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        if (ent_out)
            DRMAS_CUDA_TRY("cudaMemcpyAsync", cudaMemcpyAsync(ent_out, ent, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    }
    DRMAS_CUDA_TRY("cudaFreeAsync", scratch.release());
    return DRMAS_OK;
}

}  // namespace

int32_t lmhead_logprobs_cuda(int64_t n, int64_t V, const float* logits, const int64_t* targets, float* logp, float* entropy,
                             uint64_t* errors, void* stream) {
    return lmhead_logprobs_any(errors != nullptr ? "drmas_lmhead_logprobs_async_f32" : "drmas_lmhead_logprobs_f32", n, V, logits,
                               targets, logp, entropy, errors, stream);
}
int32_t lmhead_logprobs_cuda(int64_t n, int64_t V, const uint16_t* logits, const int64_t* targets, float* logp, float* entropy,
                             uint64_t* errors, void* stream) {
    return lmhead_logprobs_any(errors != nullptr ? "drmas_lmhead_logprobs_async_bf16" : "drmas_lmhead_logprobs_bf16", n, V, logits,
                               targets, logp, entropy, errors, stream);
}
int32_t lmhead_chunk_cuda(const drmas_lmhead_config& c, int64_t num_rows, const int64_t* host_row_offsets,
                          const int64_t* row_offsets, int64_t num_tokens, int64_t c0, int64_t n, int64_t V, float* logits,
                          const int64_t* targets, const float* old_logp, const float* advantages, const float* ref_logp,
                          const uint8_t* mask, float* logp_out, float* ent_out, double* sums, uint64_t* errors,
                          void* stream) {
    return lmhead_chunk_any(errors != nullptr ? "drmas_lmhead_chunk_async_f32" : "drmas_lmhead_chunk_f32", c, num_rows,
                            host_row_offsets, row_offsets, num_tokens, c0, n, V, logits, targets, old_logp, advantages, ref_logp,
                            mask, logp_out, ent_out, sums, errors, stream);
}
int32_t lmhead_chunk_cuda(const drmas_lmhead_config& c, int64_t num_rows, const int64_t* host_row_offsets,
                          const int64_t* row_offsets, int64_t num_tokens, int64_t c0, int64_t n, int64_t V, uint16_t* logits,
                          const int64_t* targets, const float* old_logp, const float* advantages, const float* ref_logp,
                          const uint8_t* mask, float* logp_out, float* ent_out, double* sums, uint64_t* errors,
                          void* stream) {
    return lmhead_chunk_any(errors != nullptr ? "drmas_lmhead_chunk_async_bf16" : "drmas_lmhead_chunk_bf16", c, num_rows,
                            host_row_offsets, row_offsets, num_tokens, c0, n, V, logits, targets, old_logp, advantages, ref_logp,
                            mask, logp_out, ent_out, sums, errors, stream);
}

}  // namespace drmas
