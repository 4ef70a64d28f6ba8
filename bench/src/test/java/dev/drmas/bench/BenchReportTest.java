// BenchReportTest.java — the report's share of the copy: each implementation against a copy of the
// bytes it must touch (the per-row loss variant reads no per-token advantage), not the headline's;
// and the --modes option (the paper's baseline beside the headline, as rows of their own).
package dev.drmas.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

class BenchReportTest {
    private static BenchReport.Spec spec(String className) {
        return BenchReport.SPECS.stream().filter(s -> s.className().equals(className)).findFirst().orElseThrow();
    }

    @Test
    void perRowLossVariantIsMeasuredAgainstItsOwnTraffic() {
        BenchReport.Spec loss = spec("ClippedLossBench");
        assertEquals(17, loss.bytesOf("nativeCpu"));
        assertEquals(13, loss.bytesOf("nativeRows"));
        // the same time is a smaller share for the variant, which has less to move: 13/17 of it
        assertEquals(40.0, BenchReport.shareOfCopy(loss, "nativeCpu", 10.0, 25.0), 1e-9);
        assertEquals(40.0 * 13 / 17, BenchReport.shareOfCopy(loss, "nativeRows", 10.0, 25.0), 1e-9);
        // a row of the 2026-12-03 run: copy 8.743 ms, per-row 25.436 ms -> 26%, not 34%
        assertEquals(26, Math.round(BenchReport.shareOfCopy(loss, "nativeRows", 8.743, 25.436)));
    }

    @Test
    void trustedAdvantageEntryMovesTheHeadlinesBytes() {
        BenchReport.Spec adv = spec("AdvantageBench");
        assertEquals(20, adv.bytesOf("nativeTrusted"));
        assertEquals(BenchReport.shareOfCopy(adv, "nativeCpu", 11.0, 27.0), BenchReport.shareOfCopy(adv, "nativeTrusted", 11.0, 27.0));
        // GB/s counts the given bytes: 20 B x 16M rows in 27 ms
        assertEquals(20.0 * 16777216 / 27e-3 / 1e9, BenchReport.gbps(adv.bytesOf("nativeTrusted"), 16777216, 27.0), 1e-9);
    }

    @Test
    void modesAreRowsOfTheirOwnWhereTheyAreNotTheHeadline() {
        assertEquals("grouped", BenchReport.layoutKey("grouped", "drmas"));
        assertEquals("random grpo", BenchReport.layoutKey("random", "grpo"));
        assertEquals("grouped", BenchReport.layoutKey("grouped", null)); // results from before the parameter
        assertNull(BenchReport.layoutKey(null, "grpo")); // a benchmark without layouts (the loss)
    }

    @Test
    void modesOptionNamesABadModeBeforeAnyBenchmarkRuns() {
        BenchReport.Args a = BenchReport.parse(new String[]{"--modes", "drmas, grpo"});
        assertEquals(List.of("drmas", "grpo"), a.modes);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> BenchReport.parse(new String[]{"--modes", "drmas,gpro"}));
        assertTrue(e.getMessage().contains("'gpro'") && e.getMessage().contains("grpo"), e.getMessage());
    }
}
