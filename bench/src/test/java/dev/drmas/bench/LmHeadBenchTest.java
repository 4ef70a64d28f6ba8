// LmHeadBenchTest.java — the peak columns of `drmas bench-lmhead`: a fused peak that rounds to 0 MiB
// (the resident measure often reads 0 for it) is shown as a bound, never divided by ("1/Infinity").
package dev.drmas.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class LmHeadBenchTest {
    static final long MIB = 1024 * 1024;

    @Test
    void aPeakUnderHalfAMibIsABoundNotADivisor() {
        assertEquals("<1/1200", LmHeadBench.peakRatio(0, 600 * MIB));
        assertEquals("<1/1200", LmHeadBench.peakRatio(100_000, 600 * MIB));
        // rounded down: 1.3 MiB / 0.5 MiB = 2.6, and only "<1/2" is known (not "<1/3")
        assertEquals("<1/2", LmHeadBench.peakRatio(0, 13 * MIB / 10));
        assertEquals("<0.5 MiB", LmHeadBench.mib(0));
        assertEquals("<0.5 MiB", LmHeadBench.mib(LmHeadBench.HALF_MIB - 1));
    }

    @Test
    void measuredPeaksKeepTheirRatio() {
        assertEquals("1/12.5", LmHeadBench.peakRatio(48 * MIB, 600 * MIB));
        assertEquals("1/1200.0", LmHeadBench.peakRatio(LmHeadBench.HALF_MIB, 600 * MIB));
        assertEquals("48 MiB", LmHeadBench.mib(48 * MIB));
        assertEquals("1 MiB", LmHeadBench.mib(LmHeadBench.HALF_MIB));
    }

    @Test
    void unmeasuredPeaksAreSaidSo() {
        assertEquals("-", LmHeadBench.peakRatio(-1, 600 * MIB));
        assertEquals("-", LmHeadBench.peakRatio(48 * MIB, -1));
        assertEquals("-", LmHeadBench.peakRatio(0, 0));
        assertEquals("unmeasured", LmHeadBench.mib(-1));
    }
}
