// PausedJobTest.java — a whole data-parallel job paused (SIGSTOP, a scheduler's suspend, a machine
// asleep) for longer than heartbeatStaleMs must not make a rank declare a live one dead: the ranks'
// heartbeats freeze in the same pause, and the waiting rank, which could not look while it was paused,
// counts their silence from its resume. Two child JVMs as the ranks (only real processes can be stopped),
// rank 0 waiting in a sum for rank 1; the pause ends for rank 0 a moment before rank 1, the order in
// which the old count read the whole pause as rank 1's silence and stopped the run.
package dev.drmas.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.cli.ChildJvm;
import dev.drmas.config.DistributedConfig;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class PausedJobTest {
    @TempDir
    Path dir;

    /** A rank judged dead after this long without a heartbeat (the default is 10 s). */
    static final long STALE_MS = 3_000;

    /** A rank: joins, prints "joined"; rank 0 sums at once, rank 1 once the file {@code go} exists; prints its sum. */
    public static void main(String[] args) throws Exception {
        int rank = Integer.parseInt(args[0]), port = Integer.parseInt(args[1]);
        Path go = Path.of(args[2]);
        ProcessGroup.heartbeatStaleMs = STALE_MS;
        DistEnv env = new DistEnv("127.0.0.1", port, rank, 2, rank);
        try (ProcessGroup pg = new ProcessGroup(env, new DistributedConfig(DistributedConfig.Backend.GLOO, 60, 1, 25, false), false)) {
            System.out.println("joined");
            System.out.flush();
            if (rank == 1) {
                while (!Files.exists(go)) Thread.sleep(20);
            }
            double[] x = {rank + 1};
            pg.sum(x, "the gradients");
            System.out.println("sum " + x[0]);
        } catch (RuntimeException e) {
            System.out.println("failed: " + e.getMessage());
        }
        System.out.flush();
        System.exit(0);
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aPauseOfTheWholeJobIsNoRankDying() throws Exception {
        int port;
        try (var s = new java.net.ServerSocket(0)) {
            port = s.getLocalPort();
        }
        Path go = dir.resolve("go");
        List<Process> ranks = new ArrayList<>();
        List<Path> outs = new ArrayList<>();
        try {
            for (int r = 0; r < 2; r++) {
                List<String> cmd = ChildJvm.command(a -> a.startsWith("--enable-native-access") || a.startsWith("-Dorg.bytedeco."));
                cmd.addAll(List.of("-Xmx256m", PausedJobTest.class.getName(), Integer.toString(r), Integer.toString(port), go.toString()));
                Path out = dir.resolve("rank" + r + ".txt");
                ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(out.toFile());
                pb.environment().put("OMP_NUM_THREADS", "1");
                ranks.add(pb.start());
                outs.add(out);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            for (Path out : outs) {
                while (!(Files.exists(out) && Files.readString(out).contains("joined"))) {
                    assertTrue(System.nanoTime() < deadline, "the ranks did not join: " + Files.readString(out));
                    Thread.sleep(50);
                }
            }
            Thread.sleep(1_500);  // rank 0 waits in the sum, looking at rank 1's heartbeat about once a second
            signal("STOP", ranks.get(1));
            signal("STOP", ranks.get(0));
            Thread.sleep(STALE_MS + 2_000);  // longer than a rank may be silent, and than ProcessGroup.PAUSED_MS
            signal("CONT", ranks.get(0));
            Thread.sleep(1_500);  // rank 0 looks at once, then a second later: rank 1 still frozen, silent 1.5 s of rank 0's time
            signal("CONT", ranks.get(1));
            Files.writeString(go, "");
            for (Process p : ranks) assertTrue(p.waitFor(60, TimeUnit.SECONDS), "a rank did not end");
            for (int r = 0; r < 2; r++) {
                String said = Files.readString(outs.get(r), StandardCharsets.UTF_8);
                assertTrue(said.contains("sum 3.0"), "rank " + r + ": " + said);
                assertEquals(0, ranks.get(r).exitValue(), said);
            }
        } finally {
            for (Process p : ranks) {
                signal("CONT", p);
                p.destroyForcibly();
            }
        }
    }

    private static void signal(String name, Process p) throws Exception {
        new ProcessBuilder("kill", "-" + name, Long.toString(p.pid())).inheritIO().start().waitFor();
    }
}
