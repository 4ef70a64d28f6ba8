// TorchStreams.java — the cudaStream_t that a kernel call on a LibTorch tensor must use: LibTorch's
// current stream of the tensor's device (at::accelerator::getCurrentStream), as LibTorch's own
// kernels do, so that drmas's work is ordered after the ops that produced its inputs. NULL (the
// legacy default stream) was right only while nobody switched streams. The cudaStream_t itself
// comes from c10::cuda::CUDAStream, whose Java class exists only with LibTorch's CUDA presets, so
// it is reached by reflection; CPU tensors get NULL and never touch those classes.
package dev.drmas.algo;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.Stream;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;

public final class TorchStreams {
    private TorchStreams() {}

    private static volatile Method streamMethod;
    private static volatile Constructor<?> fromStream;

    /** The current CUDA stream of {@code t}'s device as a kernel argument; NULL for a CPU tensor. */
    public static MemorySegment current(Tensor t) {
        if (t == null || !t.is_cuda()) return MemorySegment.NULL;
        Stream s = torch.getCurrentStream(t.device().index());
        // stream id 0 is the device's default stream, which LibTorch runs as the legacy NULL stream
        if (s.id() == 0) return MemorySegment.NULL;
        try {
            if (streamMethod == null) {
                Class<?> c = Class.forName("org.bytedeco.pytorch.cuda.CUDAStream");
                fromStream = c.getConstructor(Stream.class);
                streamMethod = c.getMethod("stream");
            }
            Pointer p = (Pointer) streamMethod.invoke(fromStream.newInstance(s));
            return MemorySegment.ofAddress(p == null ? 0 : p.address());
        } catch (ReflectiveOperationException | LinkageError e) {
            throw new IllegalStateException("cannot get the cudaStream_t of LibTorch's current stream on "
                    + t.device().str().getString() + " (are LibTorch's CUDA presets on the classpath?)", e);
        }
    }
}
