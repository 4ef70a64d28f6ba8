// MetricsLoggerTest.java — the fan-out: every sink sees every step, a non-finite value is reported
// once per name and crashes nothing (real JSONL and TensorBoard sinks included), a failing sink is
// dropped while the others go on, and forRun lays out a run directory, fresh and resumed.
package dev.drmas.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MetricsLoggerTest {
    @TempDir
    Path dir;

    final ByteArrayOutputStream warnBytes = new ByteArrayOutputStream();
    final PrintStream warnings = new PrintStream(warnBytes, true, StandardCharsets.UTF_8);

    static final class Recording implements MetricsSink {
        final List<String> calls = new ArrayList<>();
        boolean failOnLog;
        boolean failOnClose;
        int closes;

        @Override
        public void log(long step, Map<String, Double> scalars) {
            if (failOnLog) throw new IllegalStateException("disk full");
            calls.add(step + " " + scalars);
        }

        @Override
        public void close() {
            closes++;
            if (failOnClose) throw new IllegalStateException("cannot close");
        }
    }

    @Test
    void everySinkSeesEveryStep() {
        var a = new Recording();
        var b = new Recording();
        var logger = new MetricsLogger(List.of(a, b), warnings);
        var m = new LinkedHashMap<String, Double>();
        m.put("reward/mean", 0.5);
        logger.log(1, m);
        m.put("reward/mean", 9.0); // the caller reusing its map does not change what was logged
        logger.log(2, Map.of("x", 1.0));
        assertEquals(List.of("1 {reward/mean=0.5}", "2 {x=1.0}"), a.calls);
        assertEquals(a.calls, b.calls);
        logger.close();
        logger.close();
        assertEquals(1, a.closes);
        assertThrows(IllegalStateException.class, () -> logger.log(3, Map.of()));
        assertEquals("", warnBytes.toString(StandardCharsets.UTF_8));
    }

    @Test
    void nonFiniteIsReportedOncePerNameAndKeptByEachSink() throws IOException {
        var jsonl = JsonlSink.create(dir.resolve("metrics.jsonl"));
        var tb = TensorBoardSink.create(dir.resolve("tb"));
        var logger = new MetricsLogger(List.of(jsonl, tb), warnings);
        logger.log(1, Map.of("loss", Double.NaN, "reward/mean", 0.25));
        logger.log(2, Map.of("loss", Double.POSITIVE_INFINITY, "grad_norm", Double.NEGATIVE_INFINITY));
        logger.log(3, Map.of("loss", 1.0));
        logger.close();

        List<String> warned = warnBytes.toString(StandardCharsets.UTF_8).lines().toList();
        assertEquals(2, warned.size(), warned.toString());
        assertTrue(warned.get(0).startsWith("metrics: loss is NaN at step 1 "), warned.get(0));
        assertTrue(warned.get(1).startsWith("metrics: grad_norm is -Infinity at step 2 "), warned.get(1));
        assertEquals(List.of(), logger.failures());

        List<String> lines = Files.readAllLines(dir.resolve("metrics.jsonl"));
        assertEquals(3, lines.size());
        JsonNode row1 = new ObjectMapper().readTree(lines.get(0));
        assertTrue(row1.get("loss").isNull());
        assertEquals(0.25, row1.get("reward/mean").asDouble());

        // TensorBoard: file_version, START, step 1 with reward/mean only, no record for step 2, step 3
        List<byte[]> records = TensorBoardSinkTest.readRecords(Files.readAllBytes(tb.file()));
        assertEquals(4, records.size());
        assertEquals(Map.of("reward/mean", 0.25f), TensorBoardSinkTest.event(records.get(2)).values());
        assertEquals(3, TensorBoardSinkTest.event(records.get(3)).step());
    }

    @Test
    void failingSinkIsDroppedAndTheOthersGoOn() {
        var bad = new Recording();
        var good = new Recording();
        var logger = new MetricsLogger(List.of(bad, good), warnings);
        logger.log(1, Map.of("x", 1.0));
        bad.failOnLog = true;
        logger.log(2, Map.of("x", 2.0));
        logger.log(3, Map.of("x", 3.0));
        assertEquals(List.of("1 {x=1.0}"), bad.calls);
        assertEquals(1, bad.closes);
        assertEquals(List.of("1 {x=1.0}", "2 {x=2.0}", "3 {x=3.0}"), good.calls);
        assertEquals(List.of("Recording failed at step 2: disk full"), logger.failures());
        assertEquals("metrics: Recording failed at step 2: disk full; it is dropped, the other sinks go on\n",
                warnBytes.toString(StandardCharsets.UTF_8));

        good.failOnClose = true;
        logger.close(); // reported, not thrown
        assertTrue(warnBytes.toString(StandardCharsets.UTF_8).contains("closing Recording failed: cannot close"));
    }

    @Test
    void programmingErrorsAreRejected() {
        var logger = new MetricsLogger(List.of(new Recording()), warnings);
        var withNull = new LinkedHashMap<String, Double>();
        withNull.put("x", null);
        var e = assertThrows(IllegalArgumentException.class, () -> logger.log(1, withNull));
        assertEquals("metric 'x' has no value (null) at step 1", e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> logger.log(-1, Map.of()));
    }

    @Test
    void forRunLaysOutARunDirectoryAndResumes() throws IOException {
        Path run = dir.resolve("run");
        try (var logger = MetricsLogger.forRun(run, 5, -1, List.of("reward/mean"))) {
            for (int step = 1; step <= 5; step++) logger.log(step, Map.of("reward/mean", step * 0.1));
        }
        try (var logger = MetricsLogger.forRun(run, 5, 3, List.of("reward/mean"))) {
            logger.log(4, Map.of("reward/mean", 0.4));
        }
        var mapper = new ObjectMapper();
        List<Long> steps = new ArrayList<>();
        for (String l : Files.readAllLines(run.resolve("metrics.jsonl"))) steps.add(mapper.readTree(l).get("step").asLong());
        assertEquals(List.of(1L, 2L, 3L, 4L), steps);

        List<Path> events;
        try (Stream<Path> s = Files.list(run.resolve(MetricsLogger.TENSORBOARD_DIR))) {
            events = s.sorted().toList();
        }
        assertEquals(2, events.size());
        assertEquals(7, TensorBoardSinkTest.readRecords(Files.readAllBytes(events.get(0))).size());
        List<byte[]> resumed = TensorBoardSinkTest.readRecords(Files.readAllBytes(events.get(1)));
        assertEquals(3, resumed.size());
        // SessionLog START at step 4: TensorBoard drops the first run's points from step 4 on
        var start = TensorBoardSinkTest.decode(resumed.get(1));
        assertEquals(4, TensorBoardSinkTest.only(start, 2, 0).bits());
        assertEquals("0801", HexFormat.of().formatHex(TensorBoardSinkTest.only(start, 7, 2).bytes()));
    }

    @Test
    void aRunFileThatCannotBeWrittenStopsTheRun() throws IOException {
        // metrics.jsonl on a full disk (a link to /dev/full: every write fails with ENOSPC) used to give one
        // warning, then every later step was lost while the run ended 0
        Path file = dir.resolve("metrics.jsonl");
        Files.createSymbolicLink(file, Path.of("/dev/full"));
        ByteArrayOutputStream warnBytes = new ByteArrayOutputStream();
        Recording console = new Recording();
        try (MetricsLogger logger = new MetricsLogger(List.of(console, JsonlSink.create(file)),
                new PrintStream(warnBytes, true, StandardCharsets.UTF_8))) {
            var e = org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class, () -> logger.log(1, Map.of("loss", 1.0)));
            assertTrue(e.getMessage().contains("JsonlSink failed at step 1: cannot append to " + file + ": No space left on device"),
                    e.getMessage());
            assertTrue(e.getMessage().contains("the run stops"), e.getMessage());
        }
    }
}
