// JsonlSinkTest.java — metrics.jsonl: the exact text of a line, strict-JSON lines for NaN and
// infinities, no buffering between a log call and the file, and resume: a run that crashed past
// its checkpoint (with a line cut short) and was resumed leaves the same file as one that never
// crashed; a damaged line is reported by file:line; a link to a device is not synced; resume keeps
// its lines byte for byte and reads a large file a line at a time; one step's keys read back.
package dev.drmas.metrics;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.time.InstantSource;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class JsonlSinkTest {
    @TempDir
    Path dir;

    static final InstantSource CLOCK = InstantSource.fixed(Instant.ofEpochSecond(1_700_000_000L, 250_000_000));
    static final ObjectMapper STRICT = new ObjectMapper(); // rejects NaN/Infinity tokens by default

    @Test
    void loggedAtReadsOneStepsKeysWithAPrefixNonFiniteOnesIncluded() throws IOException {
        Path file = dir.resolve("metrics.jsonl");
        try (JsonlSink sink = JsonlSink.open(file, -1, CLOCK)) {
            sink.log(2, Map.of("reward/mean", 0.5, "eval/avg", 9.0));  // a training line may hold the prefix too
            sink.log(4, Map.of("reward/mean", 0.25));
            sink.log(4, Map.of("eval/pass@1", 0.375, "eval/nan", Double.NaN, "eval/inf", Double.NEGATIVE_INFINITY));
            sink.log(6, Map.of("eval/pass@1", 0.5));
        }
        assertEquals(Map.of("eval/pass@1", 0.375, "eval/nan", Double.NaN, "eval/inf", Double.NEGATIVE_INFINITY),
                JsonlSink.loggedAt(file, 4, "eval/"));
        assertEquals(Map.of("eval/avg", 9.0), JsonlSink.loggedAt(file, 2, "eval/"));
        assertEquals(Map.of(), JsonlSink.loggedAt(file, 3, "eval/"));
        assertEquals(Map.of("reward/mean", 0.25), JsonlSink.loggedAt(file, 4, "reward/"));
        assertEquals(Map.of(), JsonlSink.loggedAt(dir.resolve("absent.jsonl"), 4, "eval/"));
        // a damaged line that holds the prefix: file:line
        Files.writeString(file, "{\"step\": 4, \"eval/x\": }\n", StandardOpenOption.APPEND);
        var e = assertThrows(IOException.class, () -> JsonlSink.loggedAt(file, 4, "eval/"));
        assertTrue(e.getMessage().startsWith(file + ":5: not a JSON object"), e.getMessage());
    }

    @Test
    void lineHasStepWallTimeAndSortedKeys() throws IOException {
        Path file = dir.resolve("metrics.jsonl");
        var scalars = new LinkedHashMap<String, Double>();
        scalars.put("time/rollout_s", 3.0);
        scalars.put("agent/solver/adv_std", 1e-5);
        scalars.put("reward/mean", 0.5);
        try (var sink = JsonlSink.open(file, -1, CLOCK)) {
            sink.log(3, scalars);
            sink.log(4, Map.of());
        }
        assertEquals("""
                {"step":3,"wall_time":1.70000000025E9,"agent/solver/adv_std":1.0E-5,"reward/mean":0.5,"time/rollout_s":3.0}
                {"step":4,"wall_time":1.70000000025E9}
                """, Files.readString(file));
    }

    @Test
    void nonFiniteValuesAreNullAndNoted() throws IOException {
        Path file = dir.resolve("metrics.jsonl");
        try (var sink = JsonlSink.open(file, -1, CLOCK)) {
            sink.log(1, Map.of("a", Double.NaN, "b", Double.POSITIVE_INFINITY, "c", Double.NEGATIVE_INFINITY, "d", -2.5));
        }
        List<String> lines = Files.readAllLines(file);
        assertEquals(1, lines.size());
        JsonNode row = STRICT.readTree(lines.getFirst());
        assertTrue(row.get("a").isNull() && row.get("b").isNull() && row.get("c").isNull());
        assertEquals(-2.5, row.get("d").asDouble());
        assertEquals("NaN", row.get("nonfinite").get("a").asText());
        assertEquals("Infinity", row.get("nonfinite").get("b").asText());
        assertEquals("-Infinity", row.get("nonfinite").get("c").asText());
        assertEquals(3, row.get("nonfinite").size());
    }

    @Test
    void eachLineIsInTheFileBeforeClose() throws IOException {
        Path file = dir.resolve("metrics.jsonl");
        var sink = JsonlSink.open(file, -1, CLOCK);
        sink.log(1, Map.of("x", 1.0));
        assertEquals(1, Files.readAllLines(file).size());
        sink.log(2, Map.of("x", 2.0));
        assertEquals(2, Files.readAllLines(file).size());
        sink.close();
        assertThrows(IllegalStateException.class, () -> sink.log(3, Map.of()));
    }

    @Test
    void aFileLinkedToADeviceIsNotSynced() throws IOException {
        // metrics thrown away through a link to /dev/null: fsync of a device fails (EINVAL), which must
        // not stop the run at its first checkpoint; a regular file is synced
        Path file = dir.resolve("metrics.jsonl");
        Files.createSymbolicLink(file, Path.of("/dev/null"));
        try (var sink = JsonlSink.open(file, 3, CLOCK)) {
            sink.log(4, Map.of("loss", 1.0));
            sink.sync();
        }
        try (var sink = JsonlSink.open(dir.resolve("regular.jsonl"), -1, CLOCK)) {
            sink.log(1, Map.of("loss", 1.0));
            sink.sync();
        }
        assertEquals(List.of(1L), steps(dir.resolve("regular.jsonl")));
    }

    @Test
    void resumedRunWritesTheSameFileAsAnUninterruptedOne() throws IOException {
        Path whole = dir.resolve("whole/metrics.jsonl");
        try (var sink = JsonlSink.open(whole, -1, CLOCK)) {
            for (int step = 0; step <= 6; step++) logStep(sink, step);
        }

        Path resumed = dir.resolve("resumed/metrics.jsonl");
        var crashed = JsonlSink.open(resumed, -1, CLOCK);
        for (int step = 0; step <= 5; step++) logStep(crashed, step);
        // the crash: no close, and a line cut short mid-write
        Files.writeString(resumed, "{\"step\":6,\"wall_ti", StandardOpenOption.APPEND);

        try (var sink = JsonlSink.open(resumed, 3, CLOCK)) { // the last checkpoint was step 3
            assertEquals(List.of(0L, 0L, 1L, 2L, 3L), steps(resumed));
            for (int step = 4; step <= 6; step++) logStep(sink, step);
        }
        crashed.close();
        assertEquals(Files.readString(whole), Files.readString(resumed));
        assertEquals(List.of(0L, 0L, 1L, 2L, 3L, 4L, 5L, 6L), steps(resumed));
    }

    /** Step 0 has an evaluation line before training starts, as the trainer logs it. */
    private static void logStep(JsonlSink sink, int step) {
        if (step == 0) sink.log(0, Map.of("eval/pass@1", 0.125));
        sink.log(step, Map.of("reward/mean", step / 8.0, "loss", -step * 0.3));
    }

    @Test
    void resumeFromMissingFileStartsIt() throws IOException {
        Path file = dir.resolve("sub/metrics.jsonl");
        try (var sink = JsonlSink.open(file, 10, CLOCK)) {
            sink.log(11, Map.of("x", 1.0));
        }
        assertEquals(List.of(11L), steps(file));
    }

    @Test
    void createEmptiesAnExistingFile() throws IOException {
        Path file = dir.resolve("metrics.jsonl");
        Files.writeString(file, "{\"step\":1}\n");
        JsonlSink.create(file).close();
        assertEquals("", Files.readString(file));
    }

    @Test
    void damagedLineIsReportedWithFileAndLine() throws IOException {
        Path file = dir.resolve("metrics.jsonl");
        String before = "{\"step\":1}\nnot json\n{\"step\":2}\n";
        Files.writeString(file, before);
        var e = assertThrows(IOException.class, () -> JsonlSink.open(file, 1, CLOCK));
        assertTrue(e.getMessage().startsWith(file + ":2: not JSON"), e.getMessage());
        assertEquals(before, Files.readString(file)); // left as it was

        Files.writeString(file, "{\"step\":1}\n{\"step\":2.5}\n");
        e = assertThrows(IOException.class, () -> JsonlSink.open(file, 1, CLOCK));
        assertTrue(e.getMessage().startsWith(file + ":2: no integral \"step\""), e.getMessage());
    }

    @Test
    void resumeKeepsTheBytesOfItsLinesAndDropsBlankOnes() throws IOException {
        Path file = dir.resolve("metrics.jsonl");
        // written by hand or by another tool: spaces, a CRLF, a name that is not UTF-8, a blank
        // line, a line past the checkpoint between kept ones (an evaluation logged out of order)
        byte[] odd = "{ \"step\" : 2 , \"x\\u00e9\": 1.50 }\r\n".getBytes(StandardCharsets.UTF_8);
        byte[] latin1 = "{\"step\":3,\"caf\u00e9\":1}\n".getBytes(StandardCharsets.ISO_8859_1);
        var bytes = new java.io.ByteArrayOutputStream();
        bytes.writeBytes("{\"step\":1}\n".getBytes(StandardCharsets.UTF_8));
        bytes.writeBytes(odd);
        bytes.writeBytes(" \t\n{\"step\":9}\n".getBytes(StandardCharsets.UTF_8));
        bytes.writeBytes(latin1);
        bytes.writeBytes("{\"step\":4}\n{\"step\":5}\n{\"st".getBytes(StandardCharsets.UTF_8));
        Files.write(file, bytes.toByteArray());

        JsonlSink.open(file, 4, CLOCK).close();
        var expected = new java.io.ByteArrayOutputStream();
        expected.writeBytes("{\"step\":1}\n".getBytes(StandardCharsets.UTF_8));
        expected.writeBytes(odd);
        expected.writeBytes(latin1);
        expected.writeBytes("{\"step\":4}\n".getBytes(StandardCharsets.UTF_8));
        assertArrayEquals(expected.toByteArray(), Files.readAllBytes(file));
        assertFalse(Files.exists(dir.resolve("metrics.jsonl.tmp")));

        // nothing to drop: the file is not rewritten (its inode stays)
        Object inode = Files.getAttribute(file, "unix:ino");
        JsonlSink.open(file, 4, CLOCK).close();
        assertEquals(inode, Files.getAttribute(file, "unix:ino"));
        assertArrayEquals(expected.toByteArray(), Files.readAllBytes(file));
    }

    @Test
    void aDamagedLineAfterADroppedOneLeavesTheFileAndNoCopy() throws IOException {
        Path file = dir.resolve("metrics.jsonl");
        String before = "{\"step\":1}\n{\"step\":5}\n{\"step\":2}\n[1]\n";
        Files.writeString(file, before);
        var e = assertThrows(IOException.class, () -> JsonlSink.open(file, 1, CLOCK));
        assertTrue(e.getMessage().startsWith(file + ":4: not a JSON object"), e.getMessage());
        assertEquals(before, Files.readString(file));
        assertFalse(Files.exists(dir.resolve("metrics.jsonl.tmp")));
    }

    /**
     * A long run's file is not read into the heap at once: a JVM with a 24 MiB heap resumes a
     * 64 MiB file (100K steps of the toys' metrics write about this much; the paper's scale more).
     */
    @Test
    void resumeReadsALargeFileInABoundedHeap() throws Exception {
        Path file = dir.resolve("big/metrics.jsonl");
        String pad = "x".repeat(1500);
        int steps = 0;
        try (var out = new java.io.BufferedWriter(Files.newBufferedWriter(createParent(file)))) {
            for (long written = 0; written < (64L << 20); steps++) {
                String line = "{\"step\":" + steps + ",\"wall_time\":1.5,\"note\":\"" + pad + "\"}\n";
                out.write(line);
                written += line.length();
            }
        }
        int resumeAt = steps / 2;
        List<String> cmd = dev.drmas.cli.ChildJvm.command(a -> false);
        cmd.addAll(List.of("-Xmx24m", ResumeInChild.class.getName(), file.toString(), Integer.toString(resumeAt)));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(5, java.util.concurrent.TimeUnit.MINUTES), "the resuming JVM did not end");
        assertEquals(0, p.exitValue(), "the resuming JVM failed:\n" + out);
        try (var lines = Files.lines(file)) {
            assertEquals(resumeAt + 1, lines.count());
        }
        String last = Files.readAllLines(file).getLast();
        assertEquals(resumeAt, STRICT.readTree(last).get("step").asInt());
    }

    private static Path createParent(Path file) throws IOException {
        Files.createDirectories(file.getParent());
        return file;
    }

    /** The child of {@link #resumeReadsALargeFileInABoundedHeap}: opens the file to resume at a step. */
    public static final class ResumeInChild {
        public static void main(String[] args) throws IOException {
            JsonlSink.open(Path.of(args[0]), Long.parseLong(args[1])).close();
        }
    }

    @Test
    void reservedAndNullNamesAreRejected() throws IOException {
        try (var sink = JsonlSink.open(dir.resolve("m.jsonl"), -1, CLOCK)) {
            var e = assertThrows(IllegalArgumentException.class, () -> sink.log(1, Map.of("step", 1.0)));
            assertTrue(e.getMessage().contains("'step' is reserved"), e.getMessage());
            var withNull = new LinkedHashMap<String, Double>();
            withNull.put("x", null);
            assertThrows(IllegalArgumentException.class, () -> sink.log(1, withNull));
        }
        assertEquals(0, Files.size(dir.resolve("m.jsonl")));
    }

    private static List<Long> steps(Path file) throws IOException {
        return Files.readAllLines(file, StandardCharsets.UTF_8).stream().map(l -> {
            try {
                return STRICT.readTree(l).get("step").asLong();
            } catch (IOException ex) {
                throw new AssertionError(l, ex);
            }
        }).toList();
    }
}
