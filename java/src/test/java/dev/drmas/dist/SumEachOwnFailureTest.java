// SumEachOwnFailureTest.java — a rank's own failure inside a bucketed sum (making a bucket, or handing
// its sum back: an allocation, a bug; nothing to do with the peers) surfaces as that failure, as it
// is, and not as a collective that failed "after at most timeout_s" blaming a peer that dropped out.
package dev.drmas.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.drmas.model.Tensors;
import java.util.List;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class SumEachOwnFailureTest {
    @ParameterizedTest
    @ValueSource(strings = {"make", "done"})
    void aRanksOwnFailureInABucketIsItsOwnErrorNotAPeers(String where) throws Exception {
        String oom = "CUDA out of memory (simulated, rank 0's own, in " + where + ")";
        List<String> res = ProcessGroupTest.twoRanks(ProcessGroupTest.cfg(2, 1), pg -> {
            Collective.Buckets b = new Collective.Buckets() {
                @Override
                public int count() {
                    return 3;
                }

                @Override
                public String name(int i) {
                    return "parameters " + i;
                }

                @Override
                public Tensor make(int i) {
                    if (pg.rank() == 0 && i == 1 && where.equals("make")) throw new IllegalStateException(oom);
                    return Tensors.doubles(new double[] {i, 1});
                }

                @Override
                public void done(int i, Tensor summed) {
                    if (pg.rank() == 0 && i == 1 && where.equals("done")) throw new IllegalStateException(oom);
                }
            };
            try (PointerScope scope = new PointerScope()) {
                if (pg.rank() == 1) {
                    try {
                        pg.sumEach("the gradients", b);
                    } catch (RuntimeException e) {
                        // rank 0 left: whatever its collective says
                    }
                    return "";
                }
                RuntimeException e = assertThrows(RuntimeException.class, () -> pg.sumEach("the gradients", b));
                assertInstanceOf(IllegalStateException.class, e, "rank 0's own error, as it is: " + e);
                return e.getMessage();
            }
        });
        String m = res.get(0);
        assertEquals(oom, m, "rank 0's own message");
        assertFalse(m.contains("dropped out") || m.contains("did not arrive"), "blamed on a peer: " + m);
    }
}
