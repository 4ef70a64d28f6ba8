// NormalizeCommandTest.java — `drmas normalize` and `drmas demo` end to end through picocli on
// real files: output order and content, numbers echoed as written, trajectory ids scoped by
// uid, every flag mapped to the config, and malformed input reported by line with no output.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.algo.Advantages;
import dev.drmas.algo.GlobalPooling;
import dev.drmas.algo.NormConfig;
import dev.drmas.algo.NormMode;
import dev.drmas.algo.SingletonPolicy;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;

class NormalizeCommandTest {
    @TempDir
    Path dir;

    // Two tasks with rollouts numbered 0, 1, 2 within each task (traj ids reused across uids).
    static final String ROWS = """
            {"uid": "q1", "traj": 0, "agent": "solver", "score": 1.0}
            {"uid": "q1", "traj": 0, "agent": "verifier", "score": 0.90}
            {"uid": "q1", "traj": 1, "agent": "solver", "score": 0}

            {"uid": "q1", "traj": 1, "agent": "verifier", "score": 0.0, "extra": {"kept": [1, 2]}}
            {"uid": "q1", "traj": 2, "agent": "solver", "score": 1}
            {"uid": "q1", "traj": 2, "agent": "verifier", "score": 1}
            {"uid": 7, "traj": 0, "agent": "solver", "score": 0.5}
            {"uid": 7, "traj": 0, "agent": "verifier", "score": 0.25}
            {"uid": 7, "traj": 1, "agent": "solver", "score": 0.0}
            {"uid": 7, "traj": 1, "agent": "verifier", "score": 0.75}
            """;

    /** Reads the output's lines back (numbers as written, as the old reader's mapper did). */
    static final ObjectMapper JSON = new ObjectMapper().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);

    record Run(int exit, String err) {}

    Run run(String... args) {
        StringWriter err = new StringWriter();
        var cl = Main.commandLine();
        cl.setErr(new PrintWriter(err));
        int code = cl.execute(args);
        return new Run(code, err.toString());
    }

    Path write(String name, String text) throws IOException {
        Path p = dir.resolve(name);
        Files.writeString(p, text);
        return p;
    }

    @Test
    void writesEachRowPlusItsAdvantageInInputOrder() throws IOException {
        Path in = write("rows.jsonl", ROWS);
        Path out = dir.resolve("out.jsonl");
        Run r = run("normalize", "--mode", "drmas", "-o", out.toString(), in.toString());
        assertEquals(0, r.exit(), r.err());
        List<String> lines = Files.readAllLines(out);
        assertEquals(10, lines.size());
        // the input text survives: numbers as written, extra fields, key order
        assertTrue(lines.get(1).startsWith("{\"uid\":\"q1\",\"traj\":0,\"agent\":\"verifier\",\"score\":0.90,\"advantage\":"), lines.get(1));
        assertTrue(lines.get(3).contains("\"extra\":{\"kept\":[1,2]}"), lines.get(3));

        // the same numbers as the library on dense ids (uid q1 -> 0, 7 -> 1; traj scoped by uid)
        float[] s = {1f, 0.9f, 0f, 0f, 1f, 1f, 0.5f, 0.25f, 0f, 0.75f};
        int[] uid = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1}, traj = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4}, ag = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
        float[] expect = Advantages.compute(NormConfig.of(NormMode.DRMAS), s, uid, traj, ag, 2, 5, 2);
        for (int i = 0; i < 10; i++) {
            JsonNode node = JSON.readTree(lines.get(i));
            assertEquals(expect[i], node.get("advantage").floatValue(), 0f, "row " + i);
        }
    }

    @ParameterizedTest
    @CsvSource({"grpo,trajectories,fallback,false,false", "agent-mean,rows,raw,true,false", "agent-std,rows,zero,false,true",
            "drmas,trajectories,raw,true,true"})
    void flagsMapToTheNormalisationConfig(String mode, String pooling, String singleton, boolean biased, boolean noStd)
            throws IOException {
        Path in = write("rows.jsonl", ROWS);
        Path out = dir.resolve("out.jsonl");
        List<String> args = new java.util.ArrayList<>(List.of("normalize", "--mode", mode, "--global-pooling", pooling,
                "--singleton", singleton, "--eps", "1e-3", "-o", out.toString()));
        if (biased) args.add("--biased-std");
        if (noStd) args.add("--no-std");
        args.add(in.toString());
        Run r = run(args.toArray(String[]::new));
        assertEquals(0, r.exit(), r.err());
        NormConfig cfg = new NormConfig(NormMode.parse(mode), GlobalPooling.parse(pooling), SingletonPolicy.parse(singleton),
                !biased, !noStd, 1e-3);
        ScoredRows rows = ScoredRows.read(in);
        float[] expect = Advantages.compute(cfg, rows.scores, rows.uid, rows.traj, rows.agent, rows.numUids, rows.numTrajs, rows.numAgents());
        List<String> lines = Files.readAllLines(out);
        for (int i = 0; i < expect.length; i++) {
            assertEquals(expect[i], JSON.readTree(lines.get(i)).get("advantage").floatValue(), 0f, "row " + i);
        }
    }

    static List<Arguments> malformedLines() {
        return List.of(
                Arguments.of("{\"uid\": 1, \"traj\": 0, \"agent\": \"a\", \"score\": 1", "not valid JSON"),
                // where in the line: the byte, counted from 1
                Arguments.of("{\"uid\": 1, \"traj\": 0, \"agent\": \"a\", \"score\": 1} x",
                        "not valid JSON: unexpected 'x' after the object (one JSON object a line) (byte 49 of the line)"),
                Arguments.of("[1, 2]", "expected a JSON object, got array"),
                Arguments.of("{\"traj\": 0, \"agent\": \"a\", \"score\": 1}", "field 'uid' is missing"),
                Arguments.of("{\"uid\": 1.5, \"traj\": 0, \"agent\": \"a\", \"score\": 1}", "field 'uid' must be a string or an integer"),
                Arguments.of("{\"uid\": 1, \"traj\": null, \"agent\": \"a\", \"score\": 1}", "field 'traj' must be a string or an integer"),
                Arguments.of("{\"uid\": 1, \"traj\": 0, \"agent\": \"a\", \"score\": \"0.5\"}", "field 'score' must be a number"),
                Arguments.of("{\"uid\": 1, \"traj\": 0, \"agent\": \"a\", \"score\": 1e300}", "is not a finite float"),
                Arguments.of("{\"uid\": 1, \"traj\": 0, \"agent\": \"a\"}", "field 'score' is missing"),
                Arguments.of("{\"uid\": 1, \"traj\": 0, \"agent\": \"a\", \"score\": 1, \"advantage\": 2}", "already has a field 'advantage'"));
    }

    @ParameterizedTest
    @MethodSource("malformedLines")
    void aMalformedLineIsReportedByNumberAndNothingIsWritten(String badLine, String message) throws IOException {
        String text = "{\"uid\": 1, \"traj\": 0, \"agent\": \"a\", \"score\": 1}\n\n" + badLine + "\n"
                + "{\"uid\": 1, \"traj\": 1, \"agent\": \"a\", \"score\": 0}\n";
        Path in = write("bad.jsonl", text);
        Path out = dir.resolve("never.jsonl");
        Run r = run("normalize", "--mode", "drmas", "-o", out.toString(), in.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(in + ":3: "), r.err());
        assertTrue(r.err().contains(message), r.err());
        assertFalse(Files.exists(out), "no output may be written after a bad line");
        try (var files = Files.list(dir)) {
            assertEquals(1, files.count(), "no temporary file may be left behind");
        }
    }

    @Test
    void stdoutGetsTheBytesOfTheOutputFile() throws IOException {
        Path in = write("rows.jsonl", ROWS), out = dir.resolve("out.jsonl");
        assertEquals(0, run("normalize", "--mode", "drmas", "-o", out.toString(), in.toString()).exit());
        Cli.Captured c = Cli.runCapturingStdout("normalize", "--mode", "drmas", in.toString());
        assertEquals(0, c.run().exit(), c.run().err());
        org.junit.jupiter.api.Assertions.assertArrayEquals(Files.readAllBytes(out), c.stdout());
    }

    @Test
    void aFolderOrAnOutputNamedForTheOtherFormatIsRefused() throws IOException {
        Path folder = dir.resolve("rows.jsonl");
        Files.createDirectory(folder);
        Run r = run("normalize", "--mode", "drmas", folder.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(folder + ": is a folder, not a JSONL file"), r.err());
        Path in = write("in.jsonl", ROWS), out = dir.resolve("adv.safetensors");
        r = run("normalize", "--mode", "drmas", "-o", out.toString(), in.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(out + ": the output has the input's format (JSONL); name it .jsonl (--format names the input's format)"),
                r.err());
        assertFalse(Files.exists(out));
    }

    @Test
    void nothingReachesStdoutOnError() throws IOException {
        Path in = write("bad.jsonl", "{\"uid\": 1, \"traj\": 0, \"agent\": \"a\", \"score\": 1}\n{oops\n");
        PrintStream saved = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            Run r = run("normalize", "--mode", "grpo", in.toString());
            assertEquals(1, r.exit());
            assertTrue(r.err().contains(":2: not valid JSON"), r.err());
        } finally {
            System.setOut(saved);
        }
        assertEquals(0, captured.size(), "stdout must stay empty");
    }

    @Test
    void badFlagsAndMissingFilesAreOneLineErrors() throws IOException {
        Path in = write("rows.jsonl", ROWS);
        Run r = run("normalize", "--mode", "maximal", in.toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("mode: 'maximal' is not one of grpo, drmas, agent-mean, agent-std"), r.err());
        r = run("normalize", "--mode", "drmas", "--eps", "0", in.toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("eps: must be a finite number > 0, got 0"), r.err());
        // the value as typed, not as parsed (1e-400 is 0 as a double; it said "got 0")
        r = run("normalize", "--mode", "drmas", "--eps=1e-400", in.toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("eps: must be a finite number > 0, got 1e-400 (0 as a double)"), r.err());
        r = run("normalize", "--mode", "drmas", "--eps", "2e308", in.toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("eps: must be a finite number > 0, got 2e308 (Infinity as a double)"), r.err());
        r = run("normalize", "--mode", "drmas", "--eps", "tiny", in.toString());
        assertEquals(2, r.exit(), "picocli usage error for a value that is no number");
        assertTrue(r.err().contains("Invalid value for option '--eps': 'tiny' is not a number"), r.err());
        r = run("normalize", "--mode", "drmas", dir.resolve("absent.jsonl").toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("absent.jsonl: no such file"), r.err());
        r = run("normalize", in.toString());
        assertEquals(2, r.exit(), "picocli usage error for a missing --mode");
    }

    @Test
    void compareShowsGrpoAndDrmasOnTheShippedBatch() throws IOException {
        Path example = Path.of("..", "configs", "demo", "rollouts.jsonl");
        PrintStream saved = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        Run r;
        try {
            r = run("compare", "--input", example.toString(), "--out-dir", dir.toString());
        } finally {
            System.setOut(saved);
        }
        assertEquals(0, r.exit(), r.err());
        String text = captured.toString(StandardCharsets.UTF_8);
        // the first line names this command (it said "drmas demo") and where its kernels ran
        assertTrue(text.startsWith("drmas compare — " + example + ": 300 rows"), text);
        assertTrue(text.lines().findFirst().orElseThrow().endsWith("; kernels on " + Advantages.ARRAYS_BACKEND), text);
        assertTrue(text.contains("solver") && text.contains("verifier"), text);
        // the factor is GRPO's with row pooling; the trajectory pooling used here does not realise it
        assertTrue(text.contains("pooled over trajectories") && text.contains("an inflation that trajectory pooling does not realise"), text);
        assertFalse(text.contains("are where gradient norms spike"), text);
        assertEquals(300, Files.readAllLines(dir.resolve("drmas.jsonl")).size());
        assertEquals(300, Files.readAllLines(dir.resolve("grpo.jsonl")).size());
    }
    /**
     * --summary over more rows than a Java array holds is an error naming both counts, not
     * Math.toIntExact's bare ArithmeticException (a file of 2^31 rows is 32 GiB: the check alone).
     */
    @Test
    void aSummaryOfMoreRowsThanAnArrayHoldsIsAnErrorNamingThem() {
        NormalizeCommand.requireSummaryRows("rows.safetensors", Integer.MAX_VALUE - 8);
        UserError e = org.junit.jupiter.api.Assertions.assertThrows(UserError.class,
                () -> NormalizeCommand.requireSummaryRows("rows.safetensors", 1L << 31));
        assertEquals("rows.safetensors: --summary keeps every row in Java arrays, which hold at most 2147483639 values; the file has "
                + "2147483648 rows (run without --summary)", e.getMessage());
    }
}
