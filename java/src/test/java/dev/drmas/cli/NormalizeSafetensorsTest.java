// NormalizeSafetensorsTest.java — `drmas normalize` on columnar input (issue 17, item 6): files laid
// out byte for byte as safetensors.numpy.save_file writes them (tensors sorted by dtype, then
// name; compact header padded with spaces to a multiple of 8), for the four id/score dtype pairs,
// give the JSONL path's advantages bit for bit on the same rows; the output is a valid safetensors
// file with one F32 tensor; bad headers, shapes, lengths, dtypes and ids are errors that name the
// file and the tensor, and leave no output.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.model.SafeTensors;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class NormalizeSafetensorsTest {
    @TempDir
    Path dir;


    /** One tensor to write: its dtype name and its little-endian bytes. */
    record T(String dtype, long[] shape, byte[] data) {
    }

    /** safetensors' dtype order (the Rust enum's): save_file sorts by it, descending, then by name. */
    static final List<String> ORDER = List.of("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32",
            "F32", "F64", "I64", "U64");

    /** A file exactly as safetensors.numpy.save_file(tensors, path) writes it. */
    static byte[] saveFile(Map<String, T> tensors) {
        List<String> names = new ArrayList<>(tensors.keySet());
        names.sort(Comparator.comparingInt((String n) -> -ORDER.indexOf(tensors.get(n).dtype())).thenComparing(n -> n));
        StringBuilder h = new StringBuilder("{");
        long off = 0;
        ByteArrayOutputStream data = new ByteArrayOutputStream();
        for (String n : names) {
            T t = tensors.get(n);
            if (h.length() > 1) h.append(',');
            h.append('"').append(n).append("\":{\"dtype\":\"").append(t.dtype()).append("\",\"shape\":[");
            for (int i = 0; i < t.shape().length; i++) h.append(i > 0 ? "," : "").append(t.shape()[i]);
            h.append("],\"data_offsets\":[").append(off).append(',').append(off + t.data().length).append("]}");
            off += t.data().length;
            data.writeBytes(t.data());
        }
        h.append('}');
        while (h.length() % 8 != 0) h.append(' ');
        return assemble(h.toString(), data.toByteArray());
    }

    static byte[] assemble(String header, byte[] data) {
        byte[] hb = header.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(8 + hb.length + data.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(hb.length).put(hb).put(data);
        return b.array();
    }

    static T ids(int[] v, boolean i64) {
        ByteBuffer b = ByteBuffer.allocate(v.length * (i64 ? 8 : 4)).order(ByteOrder.LITTLE_ENDIAN);
        for (int x : v) if (i64) b.putLong(x); else b.putInt(x);
        return new T(i64 ? "I64" : "I32", new long[] {v.length}, b.array());
    }

    static T longs(long[] v) {
        ByteBuffer b = ByteBuffer.allocate(v.length * 8).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) b.putLong(x);
        return new T("I64", new long[] {v.length}, b.array());
    }

    static T scores(double[] v, boolean f64) {
        ByteBuffer b = ByteBuffer.allocate(v.length * (f64 ? 8 : 4)).order(ByteOrder.LITTLE_ENDIAN);
        for (double x : v) if (f64) b.putDouble(x); else b.putFloat((float) x);
        return new T(f64 ? "F64" : "F32", new long[] {v.length}, b.array());
    }

    /** Rollout-shaped rows: 8 trajectories per uid, 2-3 agents, 1-3 turns, some single-row segments. */
    record Rows(int[] uid, int[] traj, int[] agent, double[] score) {
        static Rows make(int tasks, long seed) {
            SplittableRandom rng = new SplittableRandom(seed);
            List<int[]> keys = new ArrayList<>();
            List<Double> s = new ArrayList<>();
            int traj = 0;
            for (int u = 0; u < tasks; u++) {
                int agents = 2 + u % 2, rollouts = u % 5 == 4 ? 1 : 8;
                for (int r = 0; r < rollouts; r++, traj++) {
                    int turns = 1 + rng.nextInt(3);
                    for (int t = 0; t < turns; t++) {
                        for (int a = 0; a < agents; a++) {
                            if (u % 7 == 6 && a == 2 && t > 0) continue;  // an agent that acts once
                            keys.add(new int[] {u, traj, a});
                            s.add(rng.nextInt(4) == 0 ? 1.0 : rng.nextDouble() * 3 - 1);
                        }
                    }
                }
            }
            int n = keys.size();
            Rows rows = new Rows(new int[n], new int[n], new int[n], new double[n]);
            for (int i = 0; i < n; i++) {
                rows.uid[i] = keys.get(i)[0];
                rows.traj[i] = keys.get(i)[1];
                rows.agent[i] = keys.get(i)[2];
                rows.score[i] = s.get(i);
            }
            return rows;
        }

        Map<String, T> tensors(boolean i64, boolean f64) {
            Map<String, T> m = new LinkedHashMap<>();
            m.put("uid", ids(uid, i64));
            m.put("traj", ids(traj, i64));
            m.put("agent", ids(agent, i64));
            m.put("score", scores(score, f64));
            return m;
        }

        /** The same rows as JSONL: traj numbered within its uid, scores as the float32 or float64 the file holds. */
        String jsonl(boolean f64) {
            StringBuilder sb = new StringBuilder();
            int first = 0;
            for (int i = 0; i < uid.length; i++) {
                if (i > 0 && uid[i] != uid[i - 1]) first = traj[i];
                String sc = f64 ? Double.toString(score[i]) : Float.toString((float) score[i]);
                sb.append(String.format(Locale.ROOT, "{\"uid\": \"task-%d\", \"traj\": %d, \"agent\": \"a%d\", \"score\": %s}%n", uid[i],
                        traj[i] - first, agent[i], sc));
            }
            return sb.toString();
        }
    }

    /** The advantages of a normalize output file, checking its layout on the way. */
    static float[] readOutput(Path out, long n) throws Exception {
        byte[] b = Files.readAllBytes(out);
        ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        long h = bb.getLong(0);
        assertEquals(0, h % 8, "the header is padded to a multiple of 8");
        JsonNode header = new ObjectMapper().readTree(new String(b, 8, (int) h, StandardCharsets.UTF_8));
        JsonNode adv = header.get("advantage");
        assertEquals("F32", adv.get("dtype").asText());
        assertEquals(n, adv.get("shape").get(0).asLong());
        assertEquals(0, adv.get("data_offsets").get(0).asLong());
        assertEquals(4 * n, adv.get("data_offsets").get(1).asLong());
        assertEquals(8 + h + 4 * n, b.length, "nothing after the data");
        assertEquals("drmas normalize", header.get("__metadata__").get("producer").asText());
        float[] a = new float[(int) n];
        for (int i = 0; i < n; i++) a[i] = bb.getFloat((int) (8 + h + 4L * i));
        // and the checkpoint reader accepts it (the same header rules)
        try (SafeTensors st = SafeTensors.open(out)) {
            assertEquals(n, st.info("advantage").numel());
        }
        return a;
    }

    static float[] jsonlAdvantages(Path jsonl, String... flags) throws Exception {
        Path out = jsonl.resolveSibling(jsonl.getFileName() + ".out.jsonl");
        List<String> args = new ArrayList<>(List.of("normalize"));
        args.addAll(List.of(flags));
        args.addAll(List.of("-o", out.toString(), jsonl.toString()));
        Cli.Run r = Cli.run(args.toArray(String[]::new));
        assertEquals(0, r.exit(), r.err());
        List<String> lines = Files.readAllLines(out);
        float[] a = new float[lines.size()];
        for (int i = 0; i < a.length; i++) a[i] = NormalizeCommandTest.JSON.readTree(lines.get(i)).get("advantage").floatValue();
        return a;
    }

    @ParameterizedTest(name = "ids {0}, scores {1}, {2}")
    @CsvSource({"I32,F32,drmas", "I64,F32,grpo", "I32,F64,agent-mean", "I64,F64,drmas", "I64,F64,agent-std"})
    void numpyFilesOfEachDtypeGiveTheJsonlAdvantages(String idType, String scoreType, String mode) throws Exception {
        boolean i64 = idType.equals("I64"), f64 = scoreType.equals("F64");
        Rows rows = Rows.make(37, 9);
        Path st = dir.resolve("rows.safetensors");
        Files.write(st, saveFile(rows.tensors(i64, f64)));
        Path jsonl = dir.resolve("rows.jsonl");
        Files.writeString(jsonl, rows.jsonl(f64));
        Path out = dir.resolve("adv.safetensors");
        Cli.Run r = Cli.run("normalize", "--mode", mode, "-o", out.toString(), st.toString());
        assertEquals(0, r.exit(), r.err());
        float[] got = readOutput(out, rows.uid().length);
        float[] want = jsonlAdvantages(jsonl, "--mode", mode);
        assertEquals(want.length, got.length);
        for (int i = 0; i < want.length; i++) {
            assertEquals(Float.floatToIntBits(want[i]), Float.floatToIntBits(got[i]), "row " + i + ": " + want[i] + " vs " + got[i]);
        }
        boolean someNonZero = false;
        for (float a : got) someNonZero |= a != 0;
        assertTrue(someNonZero, "the rows normalise to something");
    }

    @Test
    void theFileLayoutIsNumpys() {
        // safetensors' own serialisation test: {"attn.0": F32 [1,2,3]} is 64 header bytes, no padding needed
        byte[] b = saveFile(Map.of("attn.0", new T("F32", new long[] {1, 2, 3}, new byte[24])));
        assertEquals(64, ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong(0));
        assertEquals("{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}", new String(b, 8, 64, StandardCharsets.UTF_8));
        // int64 ids come before float64 scores, float32 scores before int32 ids
        Rows rows = Rows.make(2, 1);
        String h64 = header(saveFile(rows.tensors(true, true))), h32 = header(saveFile(rows.tensors(false, false)));
        assertTrue(h64.indexOf("\"agent\"") < h64.indexOf("\"traj\"") && h64.indexOf("\"uid\"") < h64.indexOf("\"score\""), h64);
        assertTrue(h32.indexOf("\"score\"") < h32.indexOf("\"agent\""), h32);
    }

    /** Where tensor {@code name}'s data starts in the file's bytes. */
    static long dataStart(byte[] file, String name) {
        try {
            String h = header(file);
            return 8 + h.length() + new ObjectMapper().readTree(h).get(name).get("data_offsets").get(0).asLong();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    static String header(byte[] file) {
        int h = (int) ByteBuffer.wrap(file).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
        return new String(file, 8, h, StandardCharsets.UTF_8);
    }

    @Test
    void formatByFlagOrExtensionAndTheSummary() throws Exception {
        Rows rows = Rows.make(5, 2);
        Path st = dir.resolve("rows.bin");  // no telling extension: --format says it
        Files.write(st, saveFile(rows.tensors(false, false)));
        Path out = dir.resolve("adv.safetensors");
        PrintStream saved = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
        Cli.Run r;
        try {
            r = Cli.run("normalize", "--mode", "drmas", "--format", "safetensors", "--summary", "-o", out.toString(), st.toString());
        } finally {
            System.setErr(saved);
        }
        assertEquals(0, r.exit(), r.err());
        readOutput(out, rows.uid().length);
        String summary = captured.toString(StandardCharsets.UTF_8);
        assertTrue(summary.startsWith(st + ": " + rows.uid().length + " rows, 5 groups, "), summary);
        assertTrue(summary.contains("\n  0 ") && summary.contains("\n  2 "), summary);
        // read as JSONL, a safetensors file is not valid JSON
        r = Cli.run("normalize", "--mode", "drmas", "--format", "jsonl", "-o", dir.resolve("x.jsonl").toString(), st.toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().contains(st + ":") && (r.err().contains("not UTF-8") || r.err().contains("not valid JSON")), r.err());
        r = Cli.run("normalize", "--mode", "drmas", "--format", "csv", st.toString());
        assertTrue(r.err().contains("format: 'csv' is not one of jsonl, safetensors"), r.err());
        // the output keeps the input's format: a .jsonl name for a safetensors result is a mistake
        r = Cli.run("normalize", "--mode", "drmas", "--format", "safetensors", "-o", dir.resolve("adv.jsonl").toString(), st.toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("the output has the input's format (safetensors); name it .safetensors (--format names the input's format)"),
                r.err());
    }

    @Test
    void aMisalignedFileIsReadThroughAnAlignedCopy() throws Exception {
        // a header length that is not a multiple of 4 (numpy never writes one; a hand-made file may)
        Rows rows = Rows.make(6, 4);
        byte[] good = saveFile(rows.tensors(false, false));
        String h = header(good).stripTrailing() + " ";
        while ((8 + h.length()) % 4 != 1) h += " ";
        byte[] odd = assemble(h, java.util.Arrays.copyOfRange(good, 8 + header(good).length(), good.length));
        Path a = dir.resolve("good.safetensors"), b = dir.resolve("odd.safetensors");
        Files.write(a, good);
        Files.write(b, odd);
        Path oa = dir.resolve("oa.safetensors"), ob = dir.resolve("ob.safetensors");
        assertEquals(0, Cli.run("normalize", "--mode", "drmas", "-o", oa.toString(), a.toString()).exit());
        Cli.Run r = Cli.run("normalize", "--mode", "drmas", "-o", ob.toString(), b.toString());
        assertEquals(0, r.exit(), r.err());
        assertEquals(java.util.Arrays.toString(readOutput(oa, rows.uid().length)), java.util.Arrays.toString(readOutput(ob, rows.uid().length)));
        // the columns the kernel reads are 4-byte aligned either way, and go with the rows' close
        for (Path p : new Path[] {a, b}) {
            SafetensorsRows sr = SafetensorsRows.open(p);
            for (java.lang.foreign.MemorySegment c : new java.lang.foreign.MemorySegment[] {sr.uid, sr.traj, sr.agent, sr.scores}) {
                assertEquals(0, c.address() % 4, p.toString());
            }
            sr.close();
            assertFalse(sr.uid.scope().isAlive(), "the mapping is released");
        }
    }

    @Test
    void stdoutGetsTheFilesBytesAndAFailedRunKeepsTheOldOutputWhole() throws Exception {
        Rows rows = Rows.make(9, 5);
        Path st = dir.resolve("rows.safetensors"), out = dir.resolve("adv.safetensors");
        Files.write(st, saveFile(rows.tensors(false, false)));
        Cli.Run r = Cli.run("normalize", "--mode", "drmas", "-o", out.toString(), st.toString());
        assertEquals(0, r.exit(), r.err());
        byte[] file = Files.readAllBytes(out);
        readOutput(out, rows.uid().length);
        // to stdout (a buffer, then written): the same bytes as the file (its mapping)
        Cli.Captured c = Cli.runCapturingStdout("normalize", "--mode", "drmas", st.toString());
        assertEquals(0, c.run().exit(), c.run().err());
        org.junit.jupiter.api.Assertions.assertArrayEquals(file, c.stdout());
        // the kernel refuses a NaN score after the new file was mapped: the old output stays as it was
        double[] nan = rows.score().clone();
        nan[rows.score().length - 2] = Double.NaN;
        Map<String, T> t = rows.tensors(false, false);
        t.put("score", scores(nan, false));
        Path bad = dir.resolve("bad.safetensors");
        Files.write(bad, saveFile(t));
        r = Cli.run("normalize", "--mode", "drmas", "-o", out.toString(), bad.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("is not finite"), r.err());
        org.junit.jupiter.api.Assertions.assertArrayEquals(file, Files.readAllBytes(out), "the old output is kept");
        try (var files = Files.list(dir)) {
            assertEquals(List.of("adv.safetensors", "bad.safetensors", "rows.safetensors"),
                    files.map(f -> f.getFileName().toString()).sorted().toList(), "no temporary file is left");
        }
    }

    /**
     * Over a million rows the columns are checked and narrowed in chunks on both cores: every value
     * still arrives (the same advantages from int64/float64 as from int32/float32), and where two
     * chunks hold bad values the error names the earlier row, as a check in order would.
     */
    @Test
    void columnsCheckedInChunksGiveTheSameAdvantagesAndNameTheFirstBadRow() throws Exception {
        int n = 2_200_000;  // three chunks of at most 1M values
        int[] uid = new int[n], traj = new int[n], agent = new int[n];
        double[] score = new double[n];
        SplittableRandom rng = new SplittableRandom(11);
        for (int i = 0; i < n; i++) {
            uid[i] = i / 40;
            traj[i] = i / 5;
            agent[i] = i % 2;
            score[i] = rng.nextInt(5) * 0.25;
        }
        Path small = dir.resolve("i32.safetensors"), wide = dir.resolve("i64.safetensors");
        Map<String, T> t = new LinkedHashMap<>();
        t.put("uid", ids(uid, false));
        t.put("traj", ids(traj, false));
        t.put("agent", ids(agent, false));
        t.put("score", scores(score, false));
        Files.write(small, saveFile(t));
        t.put("traj", ids(traj, true));
        t.put("score", scores(score, true));  // quarters: exact in float32
        Files.write(wide, saveFile(t));
        Path o1 = dir.resolve("o1.safetensors"), o2 = dir.resolve("o2.safetensors");
        assertEquals(0, Cli.run("normalize", "--mode", "drmas", "-o", o1.toString(), small.toString()).exit());
        assertEquals(0, Cli.run("normalize", "--mode", "drmas", "-o", o2.toString(), wide.toString()).exit());
        float[] a = readOutput(o1, n), b = readOutput(o2, n);
        org.junit.jupiter.api.Assertions.assertArrayEquals(a, b);
        assertTrue(a[n - 1] != 0 && a[1_500_001] != 0, "the last chunks' rows are normalised too");

        int[] badUid = uid.clone();
        badUid[2_100_000] = n;
        badUid[1_300_000] = -1;
        t.put("uid", ids(badUid, false));
        t.put("traj", ids(traj, false));
        t.put("score", scores(score, false));
        assertFirstBadRow(t, "tensor 'uid': row 1300000 holds -1");
        long[] badTraj = new long[n];
        for (int i = 0; i < n; i++) badTraj[i] = traj[i];
        badTraj[2_150_000] = 1L << 40;
        badTraj[1_100_000] = n;
        t.put("uid", ids(uid, false));
        t.put("traj", longs(badTraj));
        assertFirstBadRow(t, "tensor 'traj': row 1100000 holds " + n + ", but ids must lie in [0, " + n + ")");
        double[] badScore = score.clone();
        badScore[2_000_001] = Double.POSITIVE_INFINITY;
        badScore[1_500_000] = 1e300;
        t.put("traj", ids(traj, false));
        t.put("score", scores(badScore, true));
        assertFirstBadRow(t, "tensor 'score': row 1500000 (byte ");
    }

    private void assertFirstBadRow(Map<String, T> t, String message) throws Exception {
        Path bad = dir.resolve("bad.safetensors"), out = dir.resolve("never.safetensors");
        Files.write(bad, saveFile(t));
        Cli.Run r = Cli.run("normalize", "--mode", "drmas", "-o", out.toString(), bad.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(message), r.err());
        assertFalse(Files.exists(out));
    }

    /**
     * The rows where SafetensorsStream's chunks start, by its walk: two workers split at the first uid run
     * that starts at or after n / 2, each chunk ending at the last uid run that starts in its {@code cap} rows.
     */
    static List<Integer> chunkStarts(int[] uid, int cap) {
        int n = uid.length, split = workerSplit(uid);
        List<Integer> starts = new ArrayList<>();
        for (int[] half : new int[][] {{0, split}, {split, n}}) {
            for (int r = half[0]; r < half[1];) {
                starts.add(r);
                int len = Math.min(cap, half[1] - r), rows = len;
                if (r + len < half[1]) {
                    rows = len - 1;
                    while (rows > 0 && uid[r + rows] == uid[r + rows - 1]) rows--;
                }
                r += rows;
            }
        }
        return starts;
    }

    /** Where SafetensorsStream's second worker starts: the first uid run that starts at or after n / 2. */
    static int workerSplit(int[] uid) {
        int n = uid.length, split = n / 2;
        while (split < n && uid[split] == uid[split - 1]) split++;
        return split;
    }

    /** Runs {@code body} with chunks of {@code rows} rows (SafetensorsStream.chunkRows). */
    static <X> X withChunkRows(int rows, java.util.concurrent.Callable<X> body) throws Exception {
        String key = "drmas.normalize.chunkRows", old = System.getProperty(key);
        System.setProperty(key, Integer.toString(rows));
        try {
            return body.call();
        } finally {
            if (old == null) System.clearProperty(key); else System.setProperty(key, old);
        }
    }

    static dev.drmas.algo.NormConfig config(String... flags) {
        NormalizeCommand c = new NormalizeCommand();
        new picocli.CommandLine(c).parseArgs(java.util.stream.Stream.concat(java.util.Arrays.stream(flags), Stream.of("x")).toArray(String[]::new));
        return c.config();
    }

    /**
     * Sorted rows in chunks of whole uid runs (SafetensorsStream, called directly so that a fallback
     * cannot hide) give the whole-file output byte for byte: each mode and pooling, every dtype pair,
     * uids and trajectories with ids between them that have no rows, chunks of 200-odd rows.
     */
    @ParameterizedTest(name = "{0} {1}, ids {2}, scores {3}, gaps {4}")
    @CsvSource({"drmas,trajectories,I32,F32,false", "grpo,trajectories,I64,F64,true", "agent-mean,rows,I32,F64,true",
            "agent-std,trajectories,I64,F32,false", "drmas,rows,I32,F32,true"})
    void sortedRowsInChunksGiveTheWholeFilesOutput(String mode, String pooling, String idType, String scoreType, boolean gaps)
            throws Exception {
        Rows rows = Rows.make(300, 17);
        int n = rows.uid().length;
        if (gaps) {
            for (int i = 0; i < n; i++) {
                rows.uid()[i] = 2 * rows.uid()[i] + 1;  // every other uid without rows, and uid 0
                rows.traj()[i] = 3 * rows.traj()[i];
            }
        }
        boolean i64 = idType.equals("I64"), f64 = scoreType.equals("F64");
        Path st = dir.resolve("rows.safetensors"), whole = dir.resolve("whole.safetensors"), chunked = dir.resolve("chunked.safetensors");
        Files.write(st, saveFile(rows.tensors(i64, f64)));
        String[] flags = {"--mode", mode, "--global-pooling", pooling};
        List<String> args = new ArrayList<>(List.of("normalize"));
        args.addAll(List.of(flags));
        args.addAll(List.of("-o", whole.toString(), st.toString()));
        Cli.Run r = Cli.run(args.toArray(String[]::new));  // n rows < two chunks of the default size: the whole-file path
        assertEquals(0, r.exit(), r.err());
        NormConfigHolder.cfg = config(flags);
        boolean done = withChunkRows(211, () -> SafetensorsStream.normalize(st, chunked, NormConfigHolder.cfg,
                k -> NormalizeCommand.outputMetadata(NormConfigHolder.cfg, k)));
        assertTrue(done, "the chunked path ran");
        org.junit.jupiter.api.Assertions.assertArrayEquals(Files.readAllBytes(whole), Files.readAllBytes(chunked));
        float[] a = readOutput(chunked, n);
        long nonZero = 0;
        for (float x : a) nonZero += x != 0 ? 1 : 0;
        assertTrue(nonZero > n / 2, "advantages that are not all 0: " + nonZero);
    }

    /** (a holder, so that the lambdas above read a config set in the test) */
    static final class NormConfigHolder {
        static dev.drmas.algo.NormConfig cfg;
    }

    /**
     * What the chunked path does not cover falls back, with nothing of it left: rows out of order
     * (then the whole-file path's advantages, through the command), a uid with more rows than a chunk,
     * and errors in a late chunk, which the command then reports exactly as the whole-file path does.
     */
    @Test
    void whatTheChunksDoNotCoverFallsBackToTheWholeFilePath() throws Exception {
        Rows rows = Rows.make(300, 23);
        int n = rows.uid().length;
        dev.drmas.algo.NormConfig cfg = config("--mode", "drmas");
        java.util.function.Function<Map<String, T>, String> fallback = t -> {
            try {
                Path in = dir.resolve("in.safetensors"), out = dir.resolve("never.safetensors");
                Files.write(in, saveFile(t));
                try {
                    withChunkRows(211, () -> SafetensorsStream.normalize(in, out, cfg, k -> NormalizeCommand.outputMetadata(cfg, k)));
                } catch (SafetensorsStream.Fallback e) {
                    assertFalse(Files.exists(out), "nothing of a fallen-back run is left");
                    try (var files = Files.list(dir)) {
                        assertEquals(0, files.filter(f -> f.getFileName().toString().endsWith(".tmp")).count());
                    }
                    return e.getMessage();
                }
                return "no fallback";
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        };
        // uids in descending order (each uid's rows together): the whole-file path handles the order
        Rows rev = new Rows(new int[n], new int[n], new int[n], new double[n]);
        for (int i = 0; i < n; i++) {
            rev.uid()[i] = 299 - rows.uid()[i];
            rev.traj()[i] = rows.traj()[i];
            rev.agent()[i] = rows.agent()[i];
            rev.score()[i] = rows.score()[i];
        }
        assertEquals("rows not sorted by uid and trajectory", fallback.apply(rev.tensors(false, false)));
        Path st = dir.resolve("rev.safetensors"), viaCli = dir.resolve("cli.safetensors"), whole = dir.resolve("whole.safetensors");
        Files.write(st, saveFile(rev.tensors(false, false)));
        assertEquals(0, Cli.run("normalize", "--mode", "drmas", "-o", whole.toString(), st.toString()).exit());
        Cli.Run r = withChunkRows(211, () -> Cli.run("normalize", "--mode", "drmas", "-o", viaCli.toString(), st.toString()));
        assertEquals(0, r.exit(), r.err());
        org.junit.jupiter.api.Assertions.assertArrayEquals(Files.readAllBytes(whole), Files.readAllBytes(viaCli));
        // a uid with more rows than a chunk
        Rows one = new Rows(new int[n], rows.traj().clone(), rows.agent().clone(), rows.score().clone());
        for (int i = 0; i < n; i++) one.uid()[i] = i < 500 ? 0 : 1 + rows.uid()[i];
        for (int i = 0; i < 500; i++) one.traj()[i] = 0;
        assertEquals("a uid with more rows than a chunk", fallback.apply(one.tensors(true, false)));
        // a NaN score in the last chunks: the kernel refuses that chunk, the command names the row as ever
        double[] nan = rows.score().clone();
        nan[n - 3] = Double.NaN;
        Map<String, T> t = rows.tensors(false, false);
        t.put("score", scores(nan, false));
        assertTrue(fallback.apply(t).startsWith("the kernel refused a chunk"));
        Files.write(st, saveFile(t));
        r = withChunkRows(211, () -> Cli.run("normalize", "--mode", "drmas", "-o", viaCli.toString(), st.toString()));
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("scores[" + (n - 3) + "] is not finite"), r.err());
        org.junit.jupiter.api.Assertions.assertArrayEquals(Files.readAllBytes(whole), Files.readAllBytes(viaCli), "the old output is kept");
        // an int64 id out of range, and a trajectory that goes on in the next uid (across a chunk's edge or not)
        long[] big = new long[n];
        for (int i = 0; i < n; i++) big[i] = rows.agent()[i];
        big[n - 5] = n;
        t = rows.tensors(true, true);
        t.put("agent", longs(big));
        assertEquals("an id out of range", fallback.apply(t));
        // a last uid run with uid = n (the rows stay in order: only the range check sees it), int32 and int64
        for (boolean i64 : new boolean[] {false, true}) {
            int[] past = rows.uid().clone();
            for (int i = n - 1; i >= 0 && rows.uid()[i] == rows.uid()[n - 1]; i--) past[i] = n;
            t = rows.tensors(i64, false);
            t.put("uid", ids(past, i64));
            assertEquals("an id out of range", fallback.apply(t), i64 ? "int64" : "int32");
        }
        // a trajectory that goes on in the next uid exactly where a chunk starts: at the workers' split
        // and at the start of a chunk inside the first worker's half (the chunk's own order check cannot
        // see those; the check against the row before the chunk must)
        List<Integer> starts = chunkStarts(rows.uid(), 211);
        int split = workerSplit(rows.uid());
        assertTrue(starts.get(2) < split, starts + " / " + split);  // a chunk start inside the first half
        for (int edge : new int[] {split, starts.get(2)}) {
            int[] atEdge = rows.traj().clone();
            for (int i = edge; i < n; i++) atEdge[i] = atEdge[i] - 1;  // the edge's uid's first trajectory is the previous uid's last
            t = rows.tensors(false, false);
            t.put("traj", ids(atEdge, false));
            assertEquals("rows not sorted by uid and trajectory", fallback.apply(t), "at row " + edge);
        }
        int[] cross = rows.traj().clone();
        int at = n - 1;
        while (rows.uid()[at] == rows.uid()[n - 1]) at--;  // the last row of the second-to-last uid
        for (int i = at + 1; i < n; i++) cross[i] = cross[i] - 1;  // the last uid's first trajectory is the previous uid's last
        t = rows.tensors(false, false);
        t.put("traj", ids(cross, false));
        assertEquals("rows not sorted by uid and trajectory", fallback.apply(t));
        Files.write(st, saveFile(t));
        r = withChunkRows(211, () -> Cli.run("normalize", "--mode", "drmas", "-o", viaCli.toString(), st.toString()));
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("has uid"), r.err());
    }

    @Test
    void noRows() throws Exception {
        Rows empty = new Rows(new int[0], new int[0], new int[0], new double[0]);
        Path st = dir.resolve("empty.safetensors"), out = dir.resolve("adv.safetensors");
        Files.write(st, saveFile(empty.tensors(true, true)));
        Cli.Run r = Cli.run("normalize", "--mode", "drmas", "-o", out.toString(), st.toString());
        assertEquals(0, r.exit(), r.err());
        assertEquals(0, readOutput(out, 0).length);
    }

    static Stream<org.junit.jupiter.params.provider.Arguments> malformed() {
        Rows rows = Rows.make(4, 3);
        int n = rows.uid().length;
        List<org.junit.jupiter.params.provider.Arguments> out = new ArrayList<>();
        java.util.function.BiConsumer<byte[], String> add = (b, m) -> out.add(org.junit.jupiter.params.provider.Arguments.of(b, m));

        Map<String, T> t = rows.tensors(false, false);
        t.remove("agent");
        add.accept(saveFile(t), "no tensor 'agent' (a normalize input holds uid, traj and agent, I32 or I64, and score, F32 or F64, "
                + "each of shape [rows]; it has 'score', 'traj', 'uid')");
        add.accept(assemble("{}      ", new byte[0]), "no tensor 'uid' (a normalize input holds uid, traj and agent, I32 or I64, "
                + "and score, F32 or F64, each of shape [rows]; it has no tensors)");
        t = rows.tensors(false, false);
        t.put("score", ids(new int[n], false));
        add.accept(saveFile(t), "tensor 'score' is I32; it must be F32 or F64");
        t = rows.tensors(false, false);
        t.put("uid", scores(new double[n], false));
        add.accept(saveFile(t), "tensor 'uid' is F32; it must be I32 or I64");
        t = rows.tensors(false, false);
        t.put("traj", new T("I32", new long[] {2, n / 2}, java.util.Arrays.copyOf(ids(rows.traj(), false).data(), 4 * 2 * (n / 2))));
        add.accept(saveFile(t), "tensor 'traj' has shape [2, " + n / 2 + "]; it must be 1-D");
        t = rows.tensors(false, true);
        t.put("score", scores(java.util.Arrays.copyOf(rows.score(), n - 1), true));
        add.accept(saveFile(t), "tensor 'score' has " + (n - 1) + " rows, but 'uid' has " + n);
        int[] neg = rows.agent().clone();
        neg[5] = -1;
        t = rows.tensors(false, false);
        t.put("agent", ids(neg, false));
        add.accept(saveFile(t), "tensor 'agent': row 5 holds -1, but ids must lie in [0, " + n + ")");
        int[] big = rows.uid().clone();
        big[7] = n;
        t = rows.tensors(false, false);
        t.put("uid", ids(big, false));
        add.accept(saveFile(t), "tensor 'uid': row 7 holds " + n + ", but ids must lie in [0, " + n + ")");
        long[] huge = new long[n];
        for (int i = 0; i < n; i++) huge[i] = rows.traj()[i];
        huge[3] = 1L << 40;
        t = rows.tensors(true, false);
        t.put("traj", longs(huge));
        byte[] f = saveFile(t);
        add.accept(f, "tensor 'traj': row 3 (byte " + (dataStart(f, "traj") + 8 * 3) + " of the file) holds 1099511627776, which does not fit int32");
        // int64 ids: the bounds of the range, of int32, and a negative id (each alone in its column)
        long[][] bad64 = {{7, n}, {5, -1}, {6, Integer.MAX_VALUE}, {2, Integer.MIN_VALUE}};
        for (long[] b : bad64) {
            long[] v = new long[n];
            for (int i = 0; i < n; i++) v[i] = rows.uid()[i];
            v[(int) b[0]] = b[1];
            t = rows.tensors(true, false);
            t.put("uid", longs(v));
            add.accept(saveFile(t), "tensor 'uid': row " + b[0] + " holds " + b[1] + ", but ids must lie in [0, " + n + ")");
        }
        long[] below = new long[n];
        for (int i = 0; i < n; i++) below[i] = rows.agent()[i];
        below[1] = Integer.MIN_VALUE - 1L;
        t = rows.tensors(true, false);
        t.put("agent", longs(below));
        add.accept(saveFile(t), "tensor 'agent': row 1 (byte ");
        add.accept(saveFile(t), "holds -2147483649, which does not fit int32");
        double[] inf = rows.score().clone();
        inf[2] = 1e300;
        t = rows.tensors(true, true);
        t.put("score", scores(inf, true));
        f = saveFile(t);
        add.accept(f, "tensor 'score': row 2 (byte " + (dataStart(f, "score") + 8 * 2) + " of the file) = 1.0E300 is not a finite float");
        // float64 scores at float32's bounds are finite floats: the first that is not is named
        double[] edge = rows.score().clone();
        edge[1] = Float.MAX_VALUE;
        edge[2] = -Math.nextDown(0x1.ffffffp127);  // rounds to -MAX_VALUE
        edge[3] = 0x1.ffffffp127;  // the midpoint to 2^128: rounds to infinity
        t = rows.tensors(false, true);
        t.put("score", scores(edge, true));
        f = saveFile(t);
        add.accept(f, "tensor 'score': row 3 (byte " + (dataStart(f, "score") + 8 * 3) + " of the file) = 3.4028235677973366E38 is not a finite float");
        double[] nan = rows.score().clone();
        nan[4] = Double.NaN;
        t = rows.tensors(false, false);
        t.put("score", scores(nan, false));
        add.accept(saveFile(t), "scores[4] is not finite");  // a float32 NaN goes to the kernel as it is: its error names the row
        int[] cross = rows.traj().clone();
        cross[n - 1] = 0;  // trajectory 0 belongs to uid 0; the last row is another uid's
        t = rows.tensors(false, false);
        t.put("traj", ids(cross, false));
        add.accept(saveFile(t), "traj[" + (n - 1) + "] = 0 has uid");
        byte[] good = saveFile(rows.tensors(false, false));
        byte[] longHeader = good.clone();
        ByteBuffer.wrap(longHeader).order(ByteOrder.LITTLE_ENDIAN).putLong(0, good.length);
        add.accept(longHeader, "header length " + good.length + " exceeds the file size");
        add.accept(assemble("{\"uid\":{\"dtype\":\"I32\",", new byte[0]), "safetensors header: not valid JSON (");
        add.accept(java.util.Arrays.copyOf(good, good.length - 4), "truncated: tensor");
        add.accept(java.util.Arrays.copyOf(good, good.length + 4), "4 bytes after the end of the last tensor's data");
        add.accept(new byte[] {1, 2, 3}, "3 bytes, too short for a safetensors file");
        return out.stream();
    }

    @ParameterizedTest(name = "{1}")
    @org.junit.jupiter.params.provider.MethodSource("malformed")
    void aMalformedFileIsAnErrorNamingItWithNothingWritten(byte[] file, String message) throws Exception {
        Path st = dir.resolve("bad.safetensors"), out = dir.resolve("never.safetensors");
        Files.write(st, file);
        Cli.Run r = Cli.run("normalize", "--mode", "drmas", "-o", out.toString(), st.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(st + ": "), r.err());
        assertTrue(r.err().contains(message), r.err());
        assertFalse(Files.exists(out), "no output after an error");
        try (var files = Files.list(dir)) {
            assertEquals(1, files.count(), "no temporary file may be left behind");
        }
    }

    @Test
    void idsSpreadOverAHugeRangeAreRefusedBeforeTheKernelSizesItsStatistics() throws Exception {
        // 3000 rows, every row its own uid and agents numbered up to 2999: 9e6 (uid, agent) segments
        int n = 3000;
        int[] seq = new int[n];
        for (int i = 0; i < n; i++) seq[i] = i;
        Map<String, T> t = new LinkedHashMap<>();
        t.put("uid", ids(seq, false));
        t.put("traj", ids(seq, false));
        t.put("agent", ids(seq, false));
        t.put("score", scores(new double[n], false));
        Path st = dir.resolve("spread.safetensors");
        Files.write(st, saveFile(t));
        Cli.Run r = Cli.run("normalize", "--mode", "drmas", "-o", dir.resolve("o.safetensors").toString(), st.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("uid and agent ids span 3000 x 3000 = 9000000 (uid, agent) segments for 3000 rows"), r.err());
    }
    /**
     * An advantage past float32's range (finite scores 6e38 apart without the std) is refused as on the
     * JSONL path, naming the row, by the whole-file path and, through its fallback, by the chunked one;
     * nothing is written. In the first uid the row is row 0, the first of a chunk; in the last, a row
     * inside one.
     */
    @Test
    void anAdvantagePastFloatRangeIsRefusedNamingTheRow() throws Exception {
        Rows rows = Rows.make(300, 23);
        int n = rows.uid().length;
        for (int which : new int[] {0, rows.uid()[n - 1]}) {
            // the uid's agent 0 rows: 3e38 first, -3e38 after (at least three: the mean is <= -1e38)
            List<Integer> seg = new ArrayList<>();
            for (int i = 0; i < n; i++) if (rows.uid()[i] == which && rows.agent()[i] == 0) seg.add(i);
            assertTrue(seg.size() >= 3, "rows of the segment: " + seg.size());
            double[] s = rows.score().clone();
            for (int i : seg) s[i] = -3e38;
            s[seg.get(0)] = 3e38;
            Map<String, T> t = rows.tensors(false, false);
            t.put("score", scores(s, false));
            Path in = dir.resolve("far.safetensors"), out = dir.resolve("far-out.safetensors");
            Files.write(in, saveFile(t));
            dev.drmas.algo.NormConfig cfg = config("--mode", "drmas", "--no-std");
            SafetensorsStream.Fallback f = org.junit.jupiter.api.Assertions.assertThrows(SafetensorsStream.Fallback.class,
                    () -> withChunkRows(211, () -> SafetensorsStream.normalize(in, out, cfg, k -> NormalizeCommand.outputMetadata(cfg, k))),
                    "uid " + which);
            assertEquals("an advantage past float32's range", f.getMessage());
            for (int chunkRows : new int[] {211, 1 << 16}) {  // the chunked path (falling back), the whole-file path
                Cli.Run r = withChunkRows(chunkRows, () -> Cli.run("normalize", "--mode", "drmas", "--no-std", "-o", out.toString(), in.toString()));
                assertEquals(1, r.exit(), r.err());
                assertTrue(r.err().contains(in + ": row " + seg.get(0) + ": the advantage is Infinity"), r.err());
                assertFalse(Files.exists(out), "nothing written");
            }
        }
    }

    /**
     * Each worker's last chunk holds exactly a chunk's rows (uid runs of 8, chunks of 64 that end at
     * 56 rows, halves of 232): the chunked output is still the whole file's, with float64 scores too.
     */
    @ParameterizedTest(name = "scores {0}")
    @org.junit.jupiter.params.provider.ValueSource(strings = {"F32", "F64"})
    void halvesThatEndOnAFullChunk(String scoreType) throws Exception {
        int n = 464;
        int[] uid = new int[n], traj = new int[n], agent = new int[n];
        double[] score = new double[n];
        SplittableRandom rng = new SplittableRandom(29);
        for (int i = 0; i < n; i++) {
            uid[i] = i / 8;
            traj[i] = i / 4;
            agent[i] = i % 2;
            score[i] = rng.nextDouble() * 2 - 1;
        }
        List<Integer> starts = chunkStarts(uid, 64);
        assertEquals(n / 2, workerSplit(uid));
        assertTrue(starts.contains(n / 2 - 64) && starts.contains(n - 64), "full last chunks: " + starts);
        Rows rows = new Rows(uid, traj, agent, score);
        Path st = dir.resolve("rows.safetensors"), whole = dir.resolve("whole.safetensors"), chunked = dir.resolve("chunked.safetensors");
        Files.write(st, saveFile(rows.tensors(false, scoreType.equals("F64"))));
        assertEquals(0, Cli.run("normalize", "--mode", "drmas", "-o", whole.toString(), st.toString()).exit());
        dev.drmas.algo.NormConfig cfg = config("--mode", "drmas");
        assertTrue(withChunkRows(64, () -> SafetensorsStream.normalize(st, chunked, cfg, k -> NormalizeCommand.outputMetadata(cfg, k))));
        org.junit.jupiter.api.Assertions.assertArrayEquals(Files.readAllBytes(whole), Files.readAllBytes(chunked));
    }

    /**
     * float64 scores of exactly +-Float.MAX_VALUE are finite floats: read as such by the whole-file
     * path (the same advantages as the float32 file) and by the chunked one (no fallback).
     */
    @Test
    void float64ScoresAtFloatMaxAreAccepted() throws Exception {
        Rows rows = Rows.make(300, 31);
        int n = rows.uid().length;
        // one row at each bound, alone in its (uid, agent) segment's sign: the advantages stay finite with the std
        double[] s = rows.score().clone();
        s[0] = Float.MAX_VALUE;
        s[n / 3] = -Float.MAX_VALUE;
        Rows big = new Rows(rows.uid(), rows.traj(), rows.agent(), s);
        Path f32 = dir.resolve("f32.safetensors"), f64 = dir.resolve("f64.safetensors");
        Files.write(f32, saveFile(big.tensors(false, false)));
        // float64 scores above MAX_VALUE that round to it are the same scores
        double[] s64 = s.clone();
        s64[0] = Math.nextDown(0x1.ffffffp127);
        s64[n / 3] = -Math.nextDown(0x1.ffffffp127);
        Rows big64 = new Rows(rows.uid(), rows.traj(), rows.agent(), s64);
        Files.write(f64, saveFile(big64.tensors(false, true)));
        Path o32 = dir.resolve("o32.safetensors"), o64 = dir.resolve("o64.safetensors"), chunked = dir.resolve("chunked.safetensors");
        Cli.Run r = Cli.run("normalize", "--mode", "grpo", "-o", o32.toString(), f32.toString());
        assertEquals(0, r.exit(), r.err());
        r = Cli.run("normalize", "--mode", "grpo", "-o", o64.toString(), f64.toString());
        assertEquals(0, r.exit(), r.err());
        org.junit.jupiter.api.Assertions.assertArrayEquals(readOutput(o32, n), readOutput(o64, n));
        dev.drmas.algo.NormConfig cfg = config("--mode", "grpo");
        assertTrue(withChunkRows(211, () -> SafetensorsStream.normalize(f64, chunked, cfg, k -> NormalizeCommand.outputMetadata(cfg, k))));
        org.junit.jupiter.api.Assertions.assertArrayEquals(Files.readAllBytes(o64), Files.readAllBytes(chunked));
    }

    /**
     * The chunked path's bounds on (uid, agent) statistics: a chunk whose uid ids jump by more than a
     * chunk's worth falls back rather than sizing its statistics by the jump (the whole-file path then
     * reads the file, whose ids are dense enough); rows whose ids fit every chunk but not the whole file
     * fall back too, and the command then refuses them as the whole-file path does.
     */
    @Test
    void idsTooSpreadForAChunkOrForTheFileFallBack() throws Exception {
        dev.drmas.algo.NormConfig cfg = config("--mode", "drmas");
        Path in = dir.resolve("spread.safetensors"), out = dir.resolve("never.safetensors");
        // 3000 rows, agents 0..63, uids 0..149 then 1500..1649: the jump lies in the second worker's first chunk
        int n = 3000;
        int[] uid = new int[n], traj = new int[n], agent = new int[n];
        for (int i = 0; i < n; i++) {
            uid[i] = i < 1500 ? i / 10 : 1500 + (i - 1500) / 10;
            traj[i] = i;
            agent[i] = i % 64;
        }
        Files.write(in, saveFile(new Rows(uid, traj, agent, new double[n]).tensors(false, false)));
        SafetensorsStream.Fallback f = org.junit.jupiter.api.Assertions.assertThrows(SafetensorsStream.Fallback.class,
                () -> withChunkRows(211, () -> SafetensorsStream.normalize(in, out, cfg, k -> NormalizeCommand.outputMetadata(cfg, k))));
        assertEquals("ids spread over a wide range", f.getMessage());
        assertFalse(Files.exists(out));
        Cli.Run r = withChunkRows(211, () -> Cli.run("normalize", "--mode", "drmas", "-o", out.toString(), in.toString()));
        assertEquals(0, r.exit(), r.err());
        readOutput(out, n);
        Files.delete(out);
        // 2000 rows, uids 0..128, agents 0..999: a chunk's 14-odd uids x 1000 agents pass, the file's 129 x 1000 do not
        n = 2000;
        uid = new int[n];
        traj = new int[n];
        agent = new int[n];
        for (int i = 0; i < n; i++) {
            uid[i] = i * 129 / n;
            traj[i] = i;
            agent[i] = i % 1000;
        }
        Files.write(in, saveFile(new Rows(uid, traj, agent, new double[n]).tensors(false, false)));
        f = org.junit.jupiter.api.Assertions.assertThrows(SafetensorsStream.Fallback.class,
                () -> withChunkRows(211, () -> SafetensorsStream.normalize(in, out, cfg, k -> NormalizeCommand.outputMetadata(cfg, k))));
        assertEquals("ids spread over a wide range", f.getMessage());
        r = withChunkRows(211, () -> Cli.run("normalize", "--mode", "drmas", "-o", out.toString(), in.toString()));
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("uid and agent ids span 129 x 1000 = 129000 (uid, agent) segments for 2000 rows"), r.err());
        assertFalse(Files.exists(out));
    }

    /**
     * --summary on a safetensors file is the JSONL summary of the same rows (agents named by their
     * ids, which are also their order of first appearance here), line for line after the first, which
     * names the input.
     */
    @Test
    void theSummaryIsTheJsonlSummaryOfTheSameRows() throws Exception {
        Rows rows = Rows.make(40, 37);
        Path st = dir.resolve("rows.safetensors"), jsonl = dir.resolve("rows.jsonl");
        Files.write(st, saveFile(rows.tensors(true, false)));
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < rows.uid().length; i++) {
            sb.append(String.format(Locale.ROOT, "{\"uid\": %d, \"traj\": %d, \"agent\": \"%d\", \"score\": %s}%n", rows.uid()[i],
                    rows.traj()[i], rows.agent()[i], Float.toString((float) rows.score()[i])));
        }
        Files.writeString(jsonl, sb);
        // (chunks small enough for the chunked path, which --summary must not take: it prints no summary)
        List<String> a = withChunkRows(211, () -> summaryLines(st)), b = summaryLines(jsonl);
        assertTrue(rows.uid().length > 2 * 211, "rows: " + rows.uid().length);
        assertEquals(b.get(0).substring(jsonl.toString().length()), a.get(0).substring(st.toString().length()));
        assertEquals(b.subList(1, b.size()), a.subList(1, a.size()));
        assertEquals(3 + 2, a.size(), String.join("\n", a));  // the header, the column names, three agents
    }

    List<String> summaryLines(Path in) throws Exception {
        Path out = dir.resolve(in.getFileName() + ".out" + (in.toString().endsWith(".jsonl") ? ".jsonl" : ".safetensors"));
        PrintStream saved = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
        Cli.Run r;
        try {
            r = Cli.run("normalize", "--mode", "drmas", "--summary", "-o", out.toString(), in.toString());
        } finally {
            System.setErr(saved);
        }
        assertEquals(0, r.exit(), r.err());
        return captured.toString(StandardCharsets.UTF_8).lines().toList();
    }

    /** A FIFO is read once, into an unlinked temporary file: the same output as the regular file. */
    @Test
    @org.junit.jupiter.api.Timeout(60)
    void aFifoInputGivesTheRegularFilesOutput() throws Exception {
        Rows rows = Rows.make(9, 41);
        byte[] file = saveFile(rows.tensors(true, true));
        Path st = dir.resolve("rows.safetensors"), fifo = dir.resolve("fifo.safetensors");
        Files.write(st, file);
        Process mk = new ProcessBuilder("mkfifo", fifo.toString()).start();
        org.junit.jupiter.api.Assumptions.assumeTrue(mk.waitFor() == 0, "mkfifo failed; skipped");
        java.util.concurrent.CompletableFuture<Void> writer = java.util.concurrent.CompletableFuture.runAsync(() -> {
            try {
                Files.write(fifo, file);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        Path o1 = dir.resolve("o1.safetensors"), o2 = dir.resolve("o2.safetensors");
        Cli.Run r = Cli.run("normalize", "--mode", "agent-std", "-o", o2.toString(), fifo.toString());
        assertEquals(0, r.exit(), r.err());
        writer.get(20, java.util.concurrent.TimeUnit.SECONDS);
        assertEquals(0, Cli.run("normalize", "--mode", "agent-std", "-o", o1.toString(), st.toString()).exit());
        org.junit.jupiter.api.Assertions.assertArrayEquals(Files.readAllBytes(o1), Files.readAllBytes(o2));
    }

    /** The output's __metadata__ names the normalisation and the rows, from either path. */
    @Test
    void theOutputsMetadataNamesTheNormalisation() throws Exception {
        Rows rows = Rows.make(60, 43);
        int n = rows.uid().length;
        Path st = dir.resolve("rows.safetensors"), out = dir.resolve("adv.safetensors");
        Files.write(st, saveFile(rows.tensors(false, false)));
        String[][] cases = {
                {"--mode", "agent-std", "--global-pooling", "rows", "--singleton", "zero", "--biased-std", "--no-std", "--eps", "0.001"},
                {"--mode", "grpo"}};
        String[] want = {
                "{\"producer\":\"drmas normalize\",\"mode\":\"agent-std\",\"global_pooling\":\"rows\",\"singleton\":\"zero\","
                        + "\"std\":\"biased\",\"scale_by_std\":\"false\",\"eps\":\"0.001\",\"rows\":\"" + n + "\"}",
                "{\"producer\":\"drmas normalize\",\"mode\":\"grpo\",\"global_pooling\":\"trajectories\",\"singleton\":\"fallback\","
                        + "\"std\":\"unbiased\",\"scale_by_std\":\"true\",\"eps\":\"1.0E-6\",\"rows\":\"" + n + "\"}"};
        for (int c = 0; c < cases.length; c++) {
            for (int chunkRows : new int[] {211, 1 << 16}) {  // the chunked path, the whole-file path
                List<String> args = new ArrayList<>(List.of("normalize"));
                args.addAll(List.of(cases[c]));
                args.addAll(List.of("-o", out.toString(), st.toString()));
                Cli.Run r = withChunkRows(chunkRows, () -> Cli.run(args.toArray(String[]::new)));
                assertEquals(0, r.exit(), r.err());
                readOutput(out, n);
                JsonNode meta = new ObjectMapper().readTree(header(Files.readAllBytes(out))).get("__metadata__");
                assertEquals(want[c], meta.toString(), "chunks of " + chunkRows);
            }
        }
    }

    /** More than a MiB of output to stdout (written from its buffer a MiB at a time): the file's bytes. */
    @Test
    void aLargeOutputToStdoutIsTheFilesBytes() throws Exception {
        int n = 300_000;
        int[] uid = new int[n], traj = new int[n], agent = new int[n];
        double[] score = new double[n];
        for (int i = 0; i < n; i++) {
            uid[i] = i / 24;
            traj[i] = i / 3;
            agent[i] = i % 3;
            score[i] = (i * 7 % 11) / 4.0;
        }
        Path st = dir.resolve("big.safetensors"), out = dir.resolve("adv.safetensors");
        Files.write(st, saveFile(new Rows(uid, traj, agent, score).tensors(false, false)));
        Cli.Run r = Cli.run("normalize", "--mode", "drmas", "-o", out.toString(), st.toString());
        assertEquals(0, r.exit(), r.err());
        Cli.Captured c = Cli.runCapturingStdout("normalize", "--mode", "drmas", st.toString());
        assertEquals(0, c.run().exit(), c.run().err());
        int size = c.stdout().length;
        assertTrue(size > (1 << 20) && size % (1 << 20) != 0, "size " + size);
        org.junit.jupiter.api.Assertions.assertArrayEquals(Files.readAllBytes(out), c.stdout());
    }

    /**
     * "-" is stdin on every path: with -o a regular input of more than two chunks takes the chunked
     * path, which opened the path "-" itself, so a file named "-" in the working folder was read
     * instead of stdin (and its advantages written, exit 0).
     */
    @Test
    @org.junit.jupiter.api.Timeout(120)
    void aDashIsStdinEvenBesideAFileNamedDash() throws Exception {
        int n = 2 * SafetensorsStream.chunkRows() + 1000;  // enough rows for the chunked path, were "-" taken as a file
        int[] uid = new int[n], traj = new int[n], agent = new int[n];
        double[] inFile = new double[n], onStdin = new double[n];
        for (int i = 0; i < n; i++) {
            uid[i] = i / 24;
            traj[i] = i / 3;
            agent[i] = i % 3;
            inFile[i] = (i * 7 % 11) / 4.0;
            onStdin[i] = (i * 5 % 13) / 3.0;
        }
        Files.write(dir.resolve("-"), saveFile(new Rows(uid, traj, agent, inFile).tensors(false, false)));
        Path piped = dir.resolve("piped.safetensors"), want = dir.resolve("want.safetensors");
        Files.write(piped, saveFile(new Rows(uid, traj, agent, onStdin).tensors(false, false)));
        Cli.Run r = Cli.run("normalize", "--mode", "drmas", "-o", want.toString(), piped.toString());
        assertEquals(0, r.exit(), r.err());
        Child.Result c = Child.shell(dir, "", "< piped.safetensors", 100, "normalize", "--mode", "drmas", "--format", "safetensors",
                "-o", "got.safetensors", "-");
        assertEquals(0, c.exit(), c.err());
        org.junit.jupiter.api.Assertions.assertArrayEquals(Files.readAllBytes(want), Files.readAllBytes(dir.resolve("got.safetensors")),
                "the advantages of the rows on stdin, not of the file named \"-\"");
    }

    /**
     * --summary's statistics (9 doubles per uid x agent) that the heap cannot hold are an error that
     * names their size and the way out, not an OutOfMemoryError's stack trace; the same rows without
     * --summary still work. A child JVM with a 128 MiB heap: 40000 uids x 64 agents need 176 MiB.
     */
    @Test
    @org.junit.jupiter.api.Timeout(180)
    void aSummaryTooLargeForTheHeapIsAnErrorNotAStackTrace() throws Exception {
        int n = 40_000;
        int[] uid = new int[n], traj = new int[n], agent = new int[n];
        double[] score = new double[n];
        StringBuilder jsonl = new StringBuilder();
        for (int i = 0; i < n; i++) {
            uid[i] = i;
            traj[i] = i;
            agent[i] = i % 64;  // every agent id up to 63 occurs: 64 agents, 64 segments a row (the most allowed)
            score[i] = i % 5;
            jsonl.append("{\"uid\":").append(i).append(",\"traj\":0,\"agent\":").append(i % 64).append(",\"score\":").append(i % 5)
                    .append("}\n");
        }
        Path st = dir.resolve("rows.safetensors"), js = dir.resolve("rows.jsonl");
        Files.write(st, saveFile(new Rows(uid, traj, agent, score).tensors(false, false)));
        Files.writeString(js, jsonl);
        for (Path in : new Path[] {st, js}) {
            String out = in.toString().endsWith(".jsonl") ? "adv.jsonl" : "adv.safetensors";
            Child.Result r = smallHeap(dir, "normalize", "--mode", "drmas", "--summary", "-o", out, in.toString());
            assertEquals(1, r.exit(), r.err());
            assertFalse(r.err().contains("OutOfMemoryError") || r.err().contains("\tat "), r.err());
            assertTrue(r.err().contains(in + ": --summary needs 175.8 MiB (9 values for each of 40000 uids x 64 agents)"), r.err());
            assertTrue(r.err().contains("run without --summary, or give Java a larger heap (DRMAS_JAVA_OPTS=-Xmx"), r.err());
            assertFalse(Files.exists(dir.resolve(out)), "nothing written");
            assertEquals(List.of(), others(dir, "rows.safetensors", "rows.jsonl"), "no temporary file left");
        }
        Child.Result ok = smallHeap(dir, "normalize", "--mode", "drmas", "-o", "adv.safetensors", st.toString());
        assertEquals(0, ok.exit(), ok.err());
        readOutput(dir.resolve("adv.safetensors"), n);
    }

    /** Runs drmas in a child JVM with a 128 MiB heap (this JVM's other flags) in {@code dir}. */
    static Child.Result smallHeap(Path dir, String... args) throws Exception {
        List<String> cmd = ChildJvm.command(a -> !a.startsWith("-Xmx") && !a.startsWith("-agentlib:jdwp") && !a.startsWith("-javaagent"));
        cmd.add("-Xmx128m");
        cmd.add(Main.class.getName());
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        return new Child.Result(p.waitFor(), "", err);
    }

    static List<String> others(Path dir, String... expected) throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).filter(x -> !List.of(expected).contains(x)).sorted().toList();
        }
    }

    @Test
    void aFolderIsRefusedAsOne() throws Exception {
        Path folder = dir.resolve("rows.safetensors");
        Files.createDirectory(folder);
        Cli.Run r = Cli.run("normalize", "--mode", "drmas", "-o", dir.resolve("o.safetensors").toString(), folder.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(folder + ": is a folder, not a safetensors file"), r.err());
    }
    static Stream<org.junit.jupiter.params.provider.Arguments> badHeaders() {
        String entry = "{\"dtype\":\"I32\",\"shape\":[0],\"data_offsets\":[0,0]}";
        String deep = "{\"__metadata__\":" + "[".repeat(1100) + "]".repeat(1100) + "}";
        String[][] cases = {
            // JSON that does not parse: named as such, at the byte of the file where the parser stopped
            {"{\"uid\" 5}", "safetensors header: not valid JSON (", "at byte 15"},  // '5' where the colon belongs
            {"{\"uid\":{\"dtype\":\"I32\",", "safetensors header: not valid JSON (", "at byte 30"},  // it ends inside an object
            {"{\"uid\":" + entry + "} {}", "safetensors header: text after the JSON object at byte 65"},
            {"{\"uid\":" + entry + ",\"uid\":" + entry + "}", "safetensors header: not valid JSON (duplicate field 'uid')"},
            {deep, "safetensors header: not valid JSON (", "nesting depth"},
            {"[1]", "safetensors header: not a JSON object"},
            // fields of the wrong type: the tensor, the field and where its entry starts
            {"{\"uid\":{\"dtype\":32,\"shape\":[0],\"data_offsets\":[0,0]}}",
                "safetensors header: tensor 'uid': dtype must be a string such as \"F32\", got 32 (the entry at byte 15)"},
            {"{\"uid\":{\"dtype\":\"I32\",\"shape\":\"3\",\"data_offsets\":[0,0]}}",
                "safetensors header: tensor 'uid': shape must be a list of integers, got \"3\" (the entry at byte 15)"},
            {"{\"uid\":{\"dtype\":\"I32\",\"shape\":[0],\"data_offsets\":[0,1.5]}}",
                "safetensors header: tensor 'uid': data_offsets[1] must be a non-negative integer, got 1.5"},
            {"{\"uid\":[1]}", "safetensors header: tensor 'uid': expected an object with dtype, shape, data_offsets"},
            {"{\"__metadata__\":{\"a\":3}}", "safetensors header: __metadata__.a must be a string, got 3 (the entry at byte 24)"},
            // a long wrong value is shown shortened
            {"{\"uid\":{\"dtype\":\"I32\",\"shape\":\"" + "x".repeat(10_000) + "\",\"data_offsets\":[0,0]}}",
                "safetensors header: tensor 'uid': shape must be a list of integers, got \"xxxx", "...\" (the entry at byte 15)"},
        };
        List<org.junit.jupiter.params.provider.Arguments> out = new ArrayList<>();
        for (String[] c : cases) {
            out.add(org.junit.jupiter.params.provider.Arguments.of(assemble(c[0], new byte[0]),
                    java.util.Arrays.copyOfRange(c, 1, c.length)));
        }
        // a header cut short by the end of the file
        byte[] cut = java.util.Arrays.copyOf(assemble("{\"uid\":" + entry + "}", new byte[0]), 30);
        out.add(org.junit.jupiter.params.provider.Arguments.of(cut, new String[] {"header length 56 exceeds the file size (30 bytes)"}));
        return out.stream();
    }

    /**
     * A header that is not valid JSON, or whose fields have the wrong types, is an error in drmas's
     * words naming the file, what is wrong and where: never the JSON parser's own text (its class
     * names, "Source: REDACTED", line and column of a text the user never saw).
     */
    @ParameterizedTest(name = "{1}")
    @org.junit.jupiter.params.provider.MethodSource("badHeaders")
    void aBadHeaderIsNamedInDrmasWords(byte[] file, String[] parts) throws Exception {
        Path st = dir.resolve("bad.safetensors"), out = dir.resolve("never.safetensors");
        Files.write(st, file);
        Cli.Run r = Cli.run("normalize", "--mode", "drmas", "-o", out.toString(), st.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(st + ": "), r.err());
        for (String p : parts) assertTrue(r.err().contains(p), "'" + p + "' in " + r.err());
        for (String leak : List.of("Source", "REDACTED", "fasterxml", "`", "Exception", "JsonNode", "line:", "column:")) {
            assertFalse(r.err().contains(leak), r.err());
        }
        assertTrue(r.err().length() < 400, "short: " + r.err().length() + " characters");
        assertFalse(Files.exists(out), "no output after an error");
    }

    /** {@code head}'s bytes, then zeros up to {@code limit} bytes in all, then an error; counts the bytes read. */
    static final class CountedStdin extends java.io.InputStream {
        final byte[] head;
        final long limit;
        final boolean endless;
        long read;

        CountedStdin(byte[] head, long limit, boolean endless) {
            this.head = head;
            this.limit = limit;
            this.endless = endless;
        }

        @Override
        public int read() throws java.io.IOException {
            byte[] b = new byte[1];
            return read(b, 0, 1) < 0 ? -1 : b[0] & 0xff;
        }

        @Override
        public int read(byte[] b, int off, int len) throws java.io.IOException {
            if (len == 0) return 0;
            long end = endless ? limit : head.length;
            if (read >= end) {
                if (endless) throw new java.io.IOException("the test's stdin: read past " + limit + " bytes");
                return -1;
            }
            int k = (int) Math.min(len, end - read);
            for (int i = 0; i < k; i++) b[off + i] = read + i < head.length ? head[(int) (read + i)] : 0;
            read += k;
            return k;
        }
    }

    static Cli.Run withStdin(java.io.InputStream in, String... args) {
        java.io.InputStream saved = System.in;
        System.setIn(in);
        try {
            return Cli.run(args);
        } finally {
            System.setIn(saved);
        }
    }

    /** This JVM's open descriptors and mappings of a stdin copy ("drmas-normalize-*.safetensors"). */
    static List<String> spoolsHeld() throws Exception {
        List<String> held = new ArrayList<>();
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            for (Path fd : fds.toList()) {
                try {
                    String t = Files.readSymbolicLink(fd).toString();
                    if (t.contains("drmas-normalize-") && t.contains(".safetensors")) held.add("fd " + t);
                } catch (java.io.IOException e) {
                    // the descriptor closed while listed (the listing's own)
                }
            }
        }
        for (String m : Files.readAllLines(Path.of("/proc/self/maps"))) {
            if (m.contains("drmas-normalize-") && m.contains(".safetensors")) held.add("mapping " + m);
        }
        return held;
    }

    /**
     * Safetensors on stdin: the 8-byte length and the header are read and checked from the stream
     * before the rows are copied anywhere, so a bad header fails having read only itself (here the
     * rows behind it never end: it used to copy 64 MiB of them to /tmp and fail reading); a good one
     * is copied to an unlinked file in java.io.tmpdir, which no path leaves behind (no name, no
     * descriptor, no mapping), nor its bytes past what the header describes.
     */
    @Test
    @org.junit.jupiter.api.Timeout(120)
    void stdinsHeaderIsCheckedBeforeTheRowsAreCopied() throws Exception {
        Rows rows = Rows.make(40, 5);
        int n = rows.uid().length;
        Path out = dir.resolve("adv.safetensors");
        String[] args = {"normalize", "--mode", "drmas", "--format", "safetensors", "-o", out.toString(), "-"};
        long cap = 64L << 20;

        Map<String, T> t = rows.tensors(false, false);
        t.put("uid", scores(new double[n], false));
        byte[] wrongDtype = saveFile(t);
        byte[] badJson = assemble("{\"uid\" 5}       ", new byte[0]);
        byte[] overLimit = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(200_000_000L).array();
        Object[][] bad = {
            {wrongDtype, "<stdin>: tensor 'uid' is F32; it must be I32 or I64"},
            {badJson, "<stdin>: safetensors header: not valid JSON ("},
            {overLimit, "<stdin>: header length 200000000 is above the 100000000-byte limit"},
        };
        for (Object[] b : bad) {
            byte[] head = (byte[]) b[0];
            long headerEnd = head.length == 8 ? 8 : 8 + ByteBuffer.wrap(head).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
            CountedStdin in = new CountedStdin(java.util.Arrays.copyOf(head, (int) headerEnd), cap, true);
            Cli.Run r = withStdin(in, args);
            assertEquals(1, r.exit(), r.err());
            assertTrue(r.err().contains((String) b[1]), r.err());
            assertEquals(headerEnd, in.read, "only the length and the header are read before the header is checked");
        }

        // the stream ends inside the header, inside the data, or goes on after it
        byte[] good = saveFile(rows.tensors(false, false));
        Object[][] cut = {
            {java.util.Arrays.copyOf(good, 20), "<stdin>: header length " + header(good).length() + " exceeds the input (it ended after 20 bytes)"},
            {java.util.Arrays.copyOf(good, good.length - 6), "<stdin>: truncated: tensor"},
        };
        for (Object[] c : cut) {
            Cli.Run r = withStdin(new CountedStdin((byte[]) c[0], 0, false), args);
            assertEquals(1, r.exit(), r.err());
            assertTrue(r.err().contains((String) c[1]), r.err());
        }
        CountedStdin longer = new CountedStdin(good, cap, true);
        Cli.Run r = withStdin(longer, args);
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("<stdin>: the input goes on after the last tensor's data, which ends at byte " + good.length), r.err());
        assertTrue(longer.read < good.length + (2 << 20), "not read to its end: " + longer.read);
        assertFalse(Files.exists(out), "no output after an error");

        // a whole file: the file's own output
        Path st = dir.resolve("rows.safetensors"), want = dir.resolve("want.safetensors");
        Files.write(st, good);
        assertEquals(0, Cli.run("normalize", "--mode", "drmas", "-o", want.toString(), st.toString()).exit());
        r = withStdin(new CountedStdin(good, 0, false), args);
        assertEquals(0, r.exit(), r.err());
        org.junit.jupiter.api.Assertions.assertArrayEquals(Files.readAllBytes(want), Files.readAllBytes(out));
        assertEquals(List.of(), spoolsHeld(), "the temporary copy is gone on every path");
    }

    /**
     * A temporary copy of stdin that the temporary folder has no room for (here a file size limit,
     * which fails its writes as a full disk does) is an error naming the folder, the size and the
     * way out, before any output; it read "cannot read: File too large" as if stdin were at fault.
     */
    @Test
    @org.junit.jupiter.api.Timeout(120)
    void aTemporaryCopyWithoutRoomIsAClearError() throws Exception {
        Rows rows = Rows.make(2000, 9);
        byte[] file = saveFile(rows.tensors(false, false));
        assertTrue(file.length > 400 << 10, "larger than the limit: " + file.length);
        Files.write(dir.resolve("rows.safetensors"), file);
        Child.Result r = Child.shell(dir, "ulimit -f 256;", "< rows.safetensors", 100, "normalize", "--mode", "drmas", "--format",
                "safetensors", "-o", "adv.safetensors", "-");
        assertEquals(1, r.exit(), r.err());
        String tmp = System.getProperty("java.io.tmpdir");
        assertTrue(r.err().contains("<stdin>: cannot keep a copy of the input (" + file.length + " bytes) in a temporary file in " + tmp
                + ": File too large"), r.err());
        assertTrue(r.err().contains("-Djava.io.tmpdir="), r.err());
        assertFalse(r.err().contains("\tat "), r.err());
        assertFalse(Files.exists(dir.resolve("adv.safetensors")), "no output");
    }

    @Test
    void aCountPastInt32IsAClearError() {
        // a column of more than 2^31 rows may hold an id in [0, n) whose count does not fit int32
        // (it was narrowed to a negative count, which the kernel then refused with its own words);
        // the arithmetic alone, as no test can write such a file
        assertEquals(0, SafetensorsRows.countFrom(-1, "x"));
        assertEquals(Integer.MAX_VALUE, SafetensorsRows.countFrom(Integer.MAX_VALUE - 1L, "x"));
        for (long max : new long[] {Integer.MAX_VALUE, 1L << 31, 5_000_000_000L}) {
            UserError e = assertThrows(UserError.class, () -> SafetensorsRows.countFrom(max, "'uid'"));
            assertTrue(e.getMessage().startsWith("'uid': id " + max + " makes a count of " + (max + 1) + ", above 2^31 - 1"), e.getMessage());
        }
    }
}
