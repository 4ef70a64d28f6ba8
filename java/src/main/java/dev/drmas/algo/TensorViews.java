// TensorViews.java — the bridge from LibTorch tensors to the kernels: checks that a tensor is
// contiguous, of the expected dtype and on the expected device, and views its storage as a
// MemorySegment without copying. The view is only valid while the tensor is alive, which the
// callers guarantee by holding the tensor for the duration of the kernel call.
package dev.drmas.algo;

import dev.drmas.bindings.Backend;
import java.lang.foreign.MemorySegment;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

final class TensorViews {
    private TensorViews() {}

    /** The backend that can read {@code t}: CPU tensors run on the CPU, CUDA tensors on CUDA. */
    static Backend backendOf(String name, Tensor t) {
        if (t.is_cpu()) return Backend.CPU;
        if (t.is_cuda()) {
            if (!Backend.CUDA.available()) {
                throw new IllegalArgumentException(name + " is a CUDA tensor but libdrmas has no usable CUDA backend");
            }
            return Backend.CUDA;
        }
        throw new IllegalArgumentException(name + " must be a CPU or CUDA tensor");
    }

    /** A view of {@code t}'s data; null stays null. Checks dtype, contiguity, length and device. */
    static MemorySegment view(String name, Tensor t, ScalarType dtype, long numel, Backend backend) {
        if (t == null) return null;
        // JavaCPP returns a fresh enum object per call: intern() before comparing identities
        if (t.scalar_type().intern() != dtype) {
            throw new IllegalArgumentException(name + " must be " + dtype + " but is " + t.scalar_type().intern());
        }
        if (!t.is_contiguous()) {
            throw new IllegalArgumentException(name + " must be contiguous (call .contiguous() first)");
        }
        if (numel >= 0 && t.numel() != numel) {
            throw new IllegalArgumentException(name + " has " + t.numel() + " elements, expected " + numel);
        }
        Backend b = backendOf(name, t);
        if (b != backend) {
            throw new IllegalArgumentException(name + " is on " + b + " but the other tensors are on " + backend);
        }
        long bytes = t.numel() * elementBytes(dtype);
        if (t.numel() == 0) return MemorySegment.NULL;
        return MemorySegment.ofAddress(t.data_ptr().address()).reinterpret(bytes);
    }

    static long elementBytes(ScalarType dtype) {
        if (dtype == ScalarType.Float || dtype == ScalarType.Int) return 4;
        if (dtype == ScalarType.Long || dtype == ScalarType.Double) return 8;
        if (dtype == ScalarType.Bool || dtype == ScalarType.Byte) return 1;
        throw new IllegalArgumentException("unsupported dtype " + dtype);
    }

    static void requireSameLength(String what, int expected, String name, int actual) {
        if (actual != expected) {
            throw new IllegalArgumentException(name + " has " + actual + " entries but " + what + " has " + expected);
        }
    }
}
