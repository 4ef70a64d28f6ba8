// ReportCommandTest.java — `drmas report` as a command: a report that cannot be written (a file where
// its folder goes) is a user error naming the path, exit 1; bad runs are user errors too.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ReportCommandTest {
    @TempDir
    Path tmp;

    @Test
    void aReportThatCannotBeWrittenIsAUserErrorNamingThePath() throws IOException {
        Path run = Files.createDirectories(tmp.resolve("run"));
        Files.writeString(run.resolve("metrics.jsonl"), "{\"step\":1,\"wall_time\":1.0,\"reward/mean\":0.5}\n");
        Path notAFolder = Files.writeString(tmp.resolve("file"), "x");
        Cli.Run r = Cli.run("report", run.toString(), "-o", notAFolder.resolve("report.html").toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(notAFolder.toString()) && !r.err().contains("DRMAS_DEBUG"), r.err());
        Files.writeString(run.resolve("metrics.jsonl"), "");
        r = Cli.run("report", run.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("no training step or evaluation"), r.err());
    }
}
