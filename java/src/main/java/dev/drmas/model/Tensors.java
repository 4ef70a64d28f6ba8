// Tensors.java — copies between Java arrays and CPU tensors for the small per-step transfers of the
// model's decoding step, the rollout engine and the trainer (masks, positions, uniforms, offsets,
// advantages in; tokens and log-probs out).
// Device tensors are moved to the CPU first; everything made here belongs to the caller's
// PointerScope.
package dev.drmas.model;

import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class Tensors {
    private Tensors() {
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
        // a CPU int64 contiguous tensor is read as it is: four fewer LibTorch calls, which count
        // at batch-1 decoding (a step is a few hundred small calls)
        Tensor c = ready(t, ScalarType.Long) ? t : t.detach().cpu().to(ScalarType.Long).contiguous();
        long[] a = new long[(int) c.numel()];
        if (a.length > 0) c.data_ptr_long().get(a);
        return a;
    }

    public static float[] toFloats(Tensor t) {
        Tensor c = ready(t, ScalarType.Float) ? t : t.detach().cpu().to(ScalarType.Float).contiguous();
        float[] a = new float[(int) c.numel()];
        if (a.length > 0) c.data_ptr_float().get(a);
        return a;
    }

    private static boolean ready(Tensor t, ScalarType type) {
        return t.is_cpu() && t.scalar_type().intern() == type && t.is_contiguous();
    }
}
