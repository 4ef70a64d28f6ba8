// CudaPeakMemory.java — the device memory of a phase on a CUDA run, as the trainer logs it beside
// PeakMemory's host figures: the peaks of LibTorch's CUDA caching allocator on this rank's device
// (c10::cuda::CUDACachingAllocator, through JavaCPP's torch_cuda), allocated bytes (live tensors)
// and reserved bytes (what the allocator holds from the driver: live tensors, its cached free
// blocks and their fragmentation), each reset to the present figure at the start of a phase. They
// are the figures verl logs as perf/max_memory_allocated_gb and perf/max_memory_reserved_gb and
// PyTorch's torch.cuda.max_memory_allocated / max_memory_reserved return, and what `drmas plan`'s
// per-phase device peaks are to be compared with. The CUDA context, NCCL's buffers and anything
// allocated outside LibTorch's allocator are in neither.
//
// Only for a device that is CUDA: torch_cuda's native library exists only in the CUDA build of
// LibTorch (the -gpu jar), and the CUDA presets its class inherits from only on that build's class
// path, so nothing here may run on the CPU build or without a device. The trainer asks of() with
// the device its models are on, which Policies.device made CUDA only when torch.cuda_is_available();
// of() reaches torch_cuda for a CUDA device alone, and a library or class that still fails to load
// gives a reason and no figures, never an UnsatisfiedLinkError.
package dev.drmas.metrics;

import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Stat;
import org.bytedeco.pytorch.cuda.CUDAAllocator;
import org.bytedeco.pytorch.cuda.DeviceStats;
import org.bytedeco.pytorch.global.torch_cuda;

public final class CudaPeakMemory {
    /** The peaks of one phase, bytes: allocated (live tensors) and reserved (held by the allocator). */
    public record Peaks(long allocatedBytes, long reservedBytes) {
    }

    /** What for() found: the meter, or null and why there is none (null reason: the device is not CUDA). */
    public record Opened(CudaPeakMemory meter, String reason) {
    }

    private final CUDAAllocator allocator;
    private final byte index;

    private CudaPeakMemory(CUDAAllocator allocator, byte index) {
        this.allocator = allocator;
        this.index = index;
    }

    /**
     * The meter of {@code device} when it is a CUDA device; for any other device none, without a
     * word and without touching torch_cuda. On a CUDA device whose allocator cannot be reached
     * (torch_cuda's library not loadable, LibTorch refusing), none, with the reason.
     */
    public static Opened of(Device device) {
        if (device == null || !device.is_cuda()) return new Opened(null, null);
        byte index = device.has_index() ? device.index() : 0;
        try {
            CudaPeakMemory m = new CudaPeakMemory(torch_cuda.getAllocator(), index);
            m.start();  // reached once here, so that a failing allocator is found now, not in a phase
            m.peaks();
            return new Opened(m, null);
        } catch (LinkageError | RuntimeException e) {
            // UnsatisfiedLinkError, NoClassDefFoundError (the CUDA presets' classes), ExceptionInInitializerError;
            // RuntimeException: a c10::Error from the allocator (no such device, not initialised)
            Throwable cause = e;  // an ExceptionInInitializerError says nothing itself: the loader's error under it does
            while (cause.getCause() != null && cause.getCause() != cause) cause = cause.getCause();
            return new Opened(null, "the CUDA allocator's memory statistics of cuda:" + index + " cannot be read ("
                    + cause.getClass().getSimpleName() + ": " + cause.getMessage() + "); memory/gpu_peak_* is not logged");
        }
    }

    /** This rank's device index. */
    public int deviceIndex() {
        return index;
    }

    /** Starts a phase: resets the allocator's peaks of the device to its present figures. */
    public void start() {
        allocator.resetPeakStats(index);
    }

    /** The highest allocated and reserved bytes on the device since start(). */
    public Peaks peaks() {
        try (DeviceStats s = allocator.getDeviceStats(index)) {
            // each of the StatArrays is indexed by StatType; the Stat returned is its element 0, AGGREGATE
            // (the small and the large pool together); the view points into s, so it is read before s is freed
            Stat allocated = s.allocated_bytes(), reserved = s.reserved_bytes();
            return new Peaks(allocated.peak(), reserved.peak());
        }
    }
}
