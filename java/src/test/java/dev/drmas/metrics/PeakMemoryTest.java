// PeakMemoryTest.java — the phase peak sees memory that was touched and freed within the phase,
// and a new phase starts from the present resident size, not from the old peak.
package dev.drmas.metrics;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.Test;

class PeakMemoryTest {
    @Test
    void aFreedTensorShowsInThePeakAndNotInTheNextPhase() {
        PeakMemory first = PeakMemory.start();
        assumeTrue(first.available(), "no resettable VmHWM on this system");
        long bytes = 256L << 20;
        try (PointerScope scope = new PointerScope()) {
            Tensor t = torch.ones(new long[] {bytes / 4});  // float32, every page touched
            t.mul_(new Scalar(2.0));
        }
        long added = first.addedBytes();
        assertTrue(added >= bytes * 9 / 10, "the 256 MiB tensor shows in the peak: added " + added);
        PeakMemory second = PeakMemory.start();
        long idle = second.addedBytes();
        assertTrue(idle < bytes / 4, "a new phase does not inherit the old peak: added " + idle);
    }
}
