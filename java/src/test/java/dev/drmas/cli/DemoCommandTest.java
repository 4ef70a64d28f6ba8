// DemoCommandTest.java — `drmas demo`'s closing summary: a run resumed with another eval.k shows the
// avg@k / pass@k that both evaluations have (no crash), and metrics.jsonl=false ends a successful
// demo with exit 0 (no table, no report) instead of a missing-file error; the TensorBoard command
// is shown only when metrics.tensorboard wrote its folder.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DemoCommandTest {
    @TempDir
    Path tmp;

    @Test
    void theSummaryShowsTheEvaluationsBothHaveWhenEvalKChanged() throws Exception {
        Files.writeString(tmp.resolve("metrics.jsonl"), """
                {"step":0,"eval/avg@4":0.1,"eval/pass@1":0.1,"eval/pass@4":0.3}
                {"step":1,"reward/mean":0.2}
                {"step":2,"eval/avg@8":0.2,"eval/pass@1":0.2,"eval/pass@8":0.5}
                """);
        PrintStream saved = System.out;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        System.setOut(new PrintStream(buf, true, StandardCharsets.UTF_8));
        try {
            DemoCommand.report(tmp, 0.1, true);
        } finally {
            System.setOut(saved);
        }
        String out = buf.toString(StandardCharsets.UTF_8);
        assertTrue(out.contains("pass@1") && out.contains("0.100") && out.contains("0.200"), out);
        assertTrue(!out.contains("pass@4") && !out.contains("avg@8"), out);
        assertTrue(out.contains("tensorboard --logdir " + tmp.resolve("tensorboard").toAbsolutePath()), out);
    }

    @Test
    void theTensorBoardCommandIsShownOnlyWhenTensorBoardIsOn() throws Exception {
        Files.writeString(tmp.resolve("metrics.jsonl"), "{\"step\":0,\"eval/avg@1\":0.1,\"eval/pass@1\":0.1}\n");
        PrintStream saved = System.out;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        System.setOut(new PrintStream(buf, true, StandardCharsets.UTF_8));
        try {
            DemoCommand.report(tmp, 0.1, false);  // metrics.tensorboard=false: no folder to point at
        } finally {
            System.setOut(saved);
        }
        String out = buf.toString(StandardCharsets.UTF_8);
        assertTrue(!out.contains("tensorboard") && out.contains("checkpoints:") && out.contains("time:"), out);
    }

    @Test
    void withoutAMetricsFileTheDemoEndsWell() {
        List<String> args = new ArrayList<>(List.of("demo", "--config", "../configs/math-toy-drmas.yaml", "run.output_dir=" + tmp,
                "run.threads=1", "metrics.jsonl=false"));
        args.addAll(ExperimentCommandTest.TINY);
        Cli.Run r = Cli.run(args.toArray(String[]::new));
        assertEquals(0, r.exit(), r.err());
        assertTrue(Files.isDirectory(tmp.resolve("exp/checkpoints")), "it trained");
    }
}
