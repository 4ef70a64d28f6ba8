// TensorsTest.java — the copies between Java arrays and CPU tensors at their edges: empty arrays and
// tensors, reads that convert or follow strides, a shape the values do not fill (refused before
// anything is allocated, negative sizes included), and the per-thread counts of reads and uploads.
package dev.drmas.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.drmas.testing.TorchScope;
import java.util.List;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(TorchScope.class)
class TensorsTest {
    @Test
    void emptyAndFilledArraysBothWays() {
        Tensor empty = Tensors.longs(new long[0], 0, 3);
        assertEquals(List.of(0L, 3L), List.of(empty.size(0), empty.size(1)));
        assertArrayEquals(new long[0], Tensors.toLongs(empty));
        assertArrayEquals(new float[0], Tensors.toFloats(Tensors.floats(new float[0])));
        assertArrayEquals(new double[0], Tensors.toDoubles(Tensors.doubles(new double[0])));
        assertArrayEquals(new long[] {3, -4, 5, 6}, Tensors.toLongs(Tensors.longs(new long[] {3, -4, 5, 6}, 2, 2)));
        assertArrayEquals(new float[] {1.5f, -2f}, Tensors.toFloats(Tensors.floats(new float[] {1.5f, -2f})));
        assertArrayEquals(new double[] {0.1, 1e300}, Tensors.toDoubles(Tensors.doubles(new double[] {0.1, 1e300}, 2)));
        // reads convert (int64 to float32, float32 to float64 exactly) and follow strides (row-major order)
        assertArrayEquals(new float[] {3, -4, 5, 6}, Tensors.toFloats(Tensors.longs(new long[] {3, -4, 5, 6}, 2, 2)));
        assertArrayEquals(new double[] {0.1f, 3}, Tensors.toDoubles(Tensors.floats(new float[] {0.1f, 3})));
        assertArrayEquals(new long[] {3, 5, -4, 6}, Tensors.toLongs(Tensors.longs(new long[] {3, -4, 5, 6}, 2, 2).t()));
    }

    @Test
    void aShapeTheValuesDoNotFillIsRefused() {
        // [-2, -2] has the product 4 but is no shape
        for (long[] shape : new long[][] {{-2, -2}, {2, -2}, {5}, {2, 3}, {}}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Tensors.longs(new long[] {1, 2, 3, 4}, shape));
            assertEquals("4 values do not fill shape " + java.util.Arrays.toString(shape), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> Tensors.doubles(new double[] {1, 2, 3, 4}, shape));
            assertEquals("4 values do not fill shape " + java.util.Arrays.toString(shape), e.getMessage());
        }
        assertEquals(1, Tensors.longs(new long[] {7}).dim());
        assertEquals(0, Tensors.longs(new long[] {7}, new long[0]).dim());  // one value fills a scalar
    }

    @Test
    void eachReadAndUploadIsCounted() {
        Device cpu = new Device("cpu");
        long reads = Tensors.readBacks(), uploads = Tensors.uploads();
        Tensor l = Tensors.upload(new long[] {1, 2, 3, 4}, cpu, 2, 2);
        Tensor d = Tensors.upload(new double[] {0.5, 2}, cpu, 2, 1);
        assertEquals(uploads + 2, Tensors.uploads());
        assertEquals(reads, Tensors.readBacks());
        assertEquals(ScalarType.Long, l.scalar_type().intern());
        assertEquals(ScalarType.Double, d.scalar_type().intern());
        assertArrayEquals(new long[] {1, 2, 3, 4}, Tensors.toLongs(l));
        assertArrayEquals(new float[] {0.5f, 2}, Tensors.toFloats(d));
        assertArrayEquals(new double[] {0.5, 2}, Tensors.toDoubles(d));
        assertEquals(List.of(2L, 1L), List.of(d.size(0), d.size(1)));
        assertEquals(reads + 3, Tensors.readBacks());
        assertEquals(uploads + 2, Tensors.uploads());
    }
}
