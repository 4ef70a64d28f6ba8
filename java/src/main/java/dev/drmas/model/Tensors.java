// Tensors.java — copies between Java arrays and CPU tensors for the small per-step transfers of the
// model's decoding step, the rollout engine and the trainer (masks, positions, uniforms, offsets,
// advantages in; tokens and log-probs out).
// Device tensors are moved to the CPU first; everything made here belongs to the caller's
// PointerScope. Each read into Java (toLongs, toFloats, toDoubles) and each copy of a Java array to
// the model's device (upload) is counted per thread: on a GPU each is a host transfer (a read-back
// waits for the device), so tests can pin how many a decoding step makes even on the CPU.
package dev.drmas.model;

import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class Tensors {
    private Tensors() {
    }

    /**
     * This thread's count of reads into Java [0] and of uploads of Java arrays [1]: every call
     * counts, whatever the tensor's device, as each is a host transfer where the tensors are on a
     * GPU (a read-back also a synchronisation). Per thread, so that tests running side by side do
     * not see each other's.
     */
    private static final ThreadLocal<long[]> TRANSFERS = ThreadLocal.withInitial(() -> new long[2]);

    /** Reads of tensors into Java arrays on this thread so far (toLongs, toFloats, toDoubles). */
    public static long readBacks() {
        return TRANSFERS.get()[0];
    }

    /** Copies of Java arrays to a device on this thread so far ({@link #upload}). */
    public static long uploads() {
        return TRANSFERS.get()[1];
    }

    /** {@code a} as an int64 tensor of {@code shape} on {@code device}: one counted host-to-device copy (none on the CPU). */
    public static Tensor upload(long[] a, Device device, long... shape) {
        TRANSFERS.get()[1]++;
        Tensor t = longs(a, shape);
        return device.is_cpu() ? t : t.to(device, ScalarType.Long);
    }

    /** {@code a} as a float64 tensor of {@code shape} on {@code device}: one counted host-to-device copy (none on the CPU). */
    public static Tensor upload(double[] a, Device device, long... shape) {
        TRANSFERS.get()[1]++;
        Tensor t = doubles(a, shape);
        return device.is_cpu() ? t : t.to(device, ScalarType.Double);
    }

    public static Tensor doubles(double[] a) {
        return doubles(a, a.length);
    }

    /** {@code a} as a float64 CPU tensor of {@code shape} (whose product is a.length), in one LibTorch call. */
    public static Tensor doubles(double[] a, long... shape) {
        checkFills(a.length, shape);
        Tensor t = torch.empty(shape, new TensorOptions(ScalarType.Double), null);
        if (a.length > 0) t.data_ptr_double().put(a);  // data_ptr of an empty tensor is null
        return t;
    }

    public static Tensor floats(float[] a) {
        Tensor t = torch.empty(new long[] {a.length}, new TensorOptions(ScalarType.Float), null);
        if (a.length > 0) t.data_ptr_float().put(a);
        return t;
    }

    public static Tensor longs(long[] a) {
        return longs(a, a.length);
    }

    /** {@code a} as an int64 CPU tensor of {@code shape} (whose product is a.length), in one LibTorch call. */
    public static Tensor longs(long[] a, long... shape) {
        checkFills(a.length, shape);
        Tensor t = torch.empty(shape, new TensorOptions(ScalarType.Long), null);
        if (a.length > 0) t.data_ptr_long().put(a);
        return t;
    }

    /** Before allocating: a shape the values do not fill is the caller's mistake, not an allocation to try. */
    private static void checkFills(int values, long[] shape) {
        long n = 1;
        for (long d : shape) {
            if (d < 0) n = -1;
            if (n >= 0) n *= d;
        }
        if (n != values) {
            throw new IllegalArgumentException(values + " values do not fill shape " + java.util.Arrays.toString(shape));
        }
    }

    public static long[] toLongs(Tensor t) {
        Tensor c = onHost(t, ScalarType.Long);
        long[] a = new long[(int) c.numel()];
        if (a.length > 0) c.data_ptr_long().get(a);
        return a;
    }

    public static float[] toFloats(Tensor t) {
        Tensor c = onHost(t, ScalarType.Float);
        float[] a = new float[(int) c.numel()];
        if (a.length > 0) c.data_ptr_float().get(a);
        return a;
    }

    /** The values of {@code t} as float64, in one read (one synchronisation on a GPU). */
    public static double[] toDoubles(Tensor t) {
        Tensor c = onHost(t, ScalarType.Double);
        double[] a = new double[(int) c.numel()];
        if (a.length > 0) c.data_ptr_double().get(a);
        return a;
    }

    /**
     * {@code t} as a contiguous CPU tensor of {@code type}, counted as one read into Java: a CPU
     * tensor already so is taken as it is (four fewer LibTorch calls, which count at batch-1
     * decoding: a step is a few hundred small calls).
     */
    private static Tensor onHost(Tensor t, ScalarType type) {
        TRANSFERS.get()[0]++;
        boolean ready = t.is_cpu() && t.scalar_type().intern() == type && t.is_contiguous();
        return ready ? t : t.detach().cpu().to(type).contiguous();
    }
}
