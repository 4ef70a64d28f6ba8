// LaunchAwaitTest.java — how `drmas launch` waits for its ranks (LaunchCommand.await), on real
// processes standing in for ranks (sh): a failed rank stops the others at once and its status is the
// launcher's; a rank that stopped after its save (75: a tool could not go on; 143: SIGTERM) lets the
// others end on their own, as the ranks agreed to stop together, and is killed only past the grace;
// a rank that fails while the others stop has its failure reported, and one whose stop (its save) failed
// when the launcher was signalled is the launcher's status; evaluation ranks (--eval) have no
// graceful stop: any status but 0 stops the others at once.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class LaunchAwaitTest {
    private final ByteArrayOutputStream said = new ByteArrayOutputStream();
    private final List<Process> started = new ArrayList<>();
    private PrintStream before;
    private long graceBefore;

    @BeforeEach
    void capture() {
        before = LaunchCommand.out;
        graceBefore = LaunchCommand.stopGraceMillis;
        LaunchCommand.out = new PrintStream(said, true, StandardCharsets.UTF_8);
    }

    @AfterEach
    void restore() {
        LaunchCommand.out = before;
        LaunchCommand.stopGraceMillis = graceBefore;
        started.forEach(Process::destroyForcibly);
    }

    private Process rank(String script) throws Exception {
        Process p = new ProcessBuilder("sh", "-c", script).start();
        started.add(p);
        return p;
    }

    private String said() {
        return said.toString(StandardCharsets.UTF_8);
    }

    /** {@code p} once it has said "ready" (its trap is set then). */
    private static Process ready(Process p) throws Exception {
        var in = new java.io.BufferedReader(new java.io.InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        assertEquals("ready", in.readLine());
        return p;
    }

    @Test
    void aRankWhoseStopFailedEndsTheLauncherWithItsStatus() throws Exception {
        // the shutdown hook's work (SIGTERM to the launcher): a rank whose save failed (1) must not let the launcher end
        // with the signal's 143, which a scheduler or a resubmitting script reads as "stopped after the checkpoint"
        java.util.function.IntConsumer before = LaunchCommand.halt;
        List<Integer> halted = new ArrayList<>();
        LaunchCommand.halt = halted::add;
        try {
            String saved = "trap 'exit 143' TERM; echo ready; while true; do sleep 0.1; done";
            String failed = "trap 'exit 1' TERM; echo ready; while true; do sleep 0.1; done";
            LaunchCommand.stopForShutdown(List.of(ready(rank(saved)), ready(rank(failed))), List.of());
            assertEquals(List.of(1), halted);
            LaunchCommand.stopForShutdown(List.of(ready(rank(saved)), ready(rank(saved))), List.of());
            assertEquals(List.of(1), halted, "every rank saved: the signal's own status");
        } finally {
            LaunchCommand.halt = before;
        }
    }

    @Test
    void theOtherRanksAreSignalledNotCutOffFromTheirPipes() throws Exception {
        // a rank that, on SIGTERM, writes a last line (a train rank: "stopped after step ..."); Process.destroy() closed
        // the launcher's end of its pipes with the signal, losing such lines and halting real ranks (their stdin watch)
        // (it says "ready" once its trap is set: a shell still starting when the other rank fails would die of the signal)
        Process other = ready(rank("trap 'echo saved; exit 143' TERM; echo ready; while true; do sleep 0.1; done"));
        assertEquals(1, LaunchCommand.await(true, List.of(rank("sleep 0.3; exit 1"), other)));
        assertEquals("saved\n", new String(other.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
        assertEquals(143, other.exitValue());
    }

    @Test
    void lostOutputWhileStoppingLetsTheRanksFinishTheirSaves() throws Exception {
        // Ctrl-C on `drmas launch ... | tee log`: tee ends too, and the next forwarded line fails; the ranks, signalled by
        // the same Ctrl-C, are saving their step: they are let end on their own, not stopped
        LaunchCommand.stopping = true;
        LaunchCommand.outputLost = new StdStreams.OutputFailure("standard output", new java.io.IOException("Broken pipe"));
        try {
            Process saving = rank("sleep 1; echo saved; exit 143");
            assertEquals(0, LaunchCommand.await(true, List.of(saving, rank("sleep 0.5; exit 130"))));
            assertEquals("saved\n", new String(saving.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
        } finally {
            LaunchCommand.stopping = false;
            LaunchCommand.outputLost = null;
        }
    }

    @Test
    void aFailedRankStopsTheOthersAtOnce() throws Exception {
        Process slow = rank("sleep 30");
        long t0 = System.nanoTime();
        assertEquals(1, LaunchCommand.await(true, List.of(rank("exit 1"), slow)));
        assertTrue((System.nanoTime() - t0) / 1e9 < 15, "stopped, not waited for");
        assertFalse(slow.isAlive());
        assertTrue(said().contains("rank 0 exited with status 1; stopping the other ranks"), said());
    }

    @Test
    void aRankThatStoppedAfterItsSaveLetsTheOthersEndOnTheirOwn() throws Exception {
        // rank 1 ends a second after rank 0 (its metrics closed, its files synced): it is not killed
        Process late = rank("sleep 1; exit 75");
        assertEquals(75, LaunchCommand.await(true, List.of(rank("exit 75"), late)));
        assertEquals(75, late.exitValue(), "ended on its own, not by the launcher's signal");
        assertTrue(said().contains("rank 0 ended with status 75 (a stop the ranks agree on, after the step's checkpoint); waiting for the other ranks to end"), said());
        assertFalse(said().contains("stopping"), said());
    }

    @Test
    void aSignalledStopWaitsToo() throws Exception {
        Process late = rank("sleep 1; exit 143");
        assertEquals(143, LaunchCommand.await(true, List.of(late, rank("exit 143"))));
        assertEquals(143, late.exitValue());
        assertTrue(said().contains("rank 1 ended with status 143 (a stop the ranks agree on"), said());
    }

    @Test
    void evaluationRanksHaveNoGracefulStop() throws Exception {
        // `drmas launch --eval`: a rank that ends with 143 was killed, not stopped after a save
        Process slow = rank("sleep 30");
        long t0 = System.nanoTime();
        assertEquals(143, LaunchCommand.await(false, List.of(rank("exit 143"), slow)));
        assertTrue((System.nanoTime() - t0) / 1e9 < 15);
        assertFalse(slow.isAlive());
        assertTrue(said().contains("rank 0 exited with status 143; stopping the other ranks"), said());
    }

    @Test
    void aRankThatDoesNotEndWithinTheGraceIsStopped() throws Exception {
        LaunchCommand.stopGraceMillis = 500;
        Process stuck = rank("sleep 30");
        long t0 = System.nanoTime();
        assertEquals(75, LaunchCommand.await(true, List.of(rank("exit 75"), stuck)));
        assertTrue((System.nanoTime() - t0) / 1e9 < 15);
        assertFalse(stuck.isAlive());
        assertTrue(said().contains("rank 1 did not end within 0.5 s of rank 0; stopping the ranks left"), said());
    }

    @Test
    void aRankThatFailsWhileTheOthersStopIsTheStatus() throws Exception {
        // e.g. its part of the stop's checkpoint could not be written
        assertEquals(1, LaunchCommand.await(true, List.of(rank("exit 75"), rank("sleep 1; exit 1"))));
        assertTrue(said().contains("rank 1 exited with status 1 while the ranks stopped"), said());
    }
}
