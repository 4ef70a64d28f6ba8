// RankProcess.java — one rank of a test's data-parallel group as a process of its own (the tests that
// stop a rank with a signal, or need a rank's store to end with its process): joins the Gloo group,
// sums a warm-up, then (the ranks named to wait: once a file exists) sums "the gradients", printing each
// stage ("joined", "warmed", "sum X") or "failed: <message>".
package dev.drmas.dist;

import dev.drmas.cli.ChildJvm;
import dev.drmas.config.DistributedConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

final class RankProcess {
    private RankProcess() {
    }

    /**
     * Args: rank, world size, port, heartbeatStaleMs (one for all, or one a rank: "3000,20000,3000"), the file to wait
     * for, the ranks that wait for it ("1,2" or "-").
     */
    public static void main(String[] args) throws Exception {
        int rank = Integer.parseInt(args[0]), world = Integer.parseInt(args[1]), port = Integer.parseInt(args[2]);
        String[] stale = args[3].split(",");
        ProcessGroup.heartbeatStaleMs = Long.parseLong(stale[stale.length == 1 ? 0 : rank]);
        Path go = Path.of(args[4]);
        boolean waits = List.of(args[5].split(",")).contains(Integer.toString(rank));
        DistEnv env = new DistEnv("127.0.0.1", port, rank, world, rank);
        try (ProcessGroup pg = new ProcessGroup(env, new DistributedConfig(DistributedConfig.Backend.GLOO, 60, 1, 25, false), false)) {
            say("joined");
            double[] x = {rank + 1};
            pg.sum(x, "the warm-up");
            say("warmed");
            while (waits && !Files.exists(go)) Thread.sleep(20);
            x[0] = rank + 1;
            pg.sum(x, "the gradients");
            say("sum " + x[0]);
        } catch (RuntimeException e) {
            say("failed: " + e.getMessage());
        }
        System.exit(0);
    }

    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** Starts {@code world} rank processes on a free port (staleMs as main's), each's output in {@code dir}/rankR.txt; returns them. */
    static List<Process> start(Path dir, int world, String staleMs, Path go, String waiting) throws Exception {
        int port;
        try (var s = new java.net.ServerSocket(0)) {
            port = s.getLocalPort();
        }
        List<Process> ranks = new ArrayList<>();
        for (int r = 0; r < world; r++) {
            List<String> cmd = ChildJvm.command(a -> a.startsWith("--enable-native-access") || a.startsWith("-Dorg.bytedeco."));
            cmd.addAll(List.of("-Xmx256m", RankProcess.class.getName(), Integer.toString(r), Integer.toString(world), Integer.toString(port),
                    staleMs, go.toString(), waiting));
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(dir.resolve("rank" + r + ".txt").toFile());
            pb.environment().put("OMP_NUM_THREADS", "1");
            ranks.add(pb.start());
        }
        return ranks;
    }

    /** What rank {@code r} printed so far. */
    static String said(Path dir, int r) throws java.io.IOException {
        Path out = dir.resolve("rank" + r + ".txt");
        return Files.exists(out) ? Files.readString(out) : "";
    }

    /** Waits (up to 60 s) until every rank has printed {@code line}. */
    static void await(Path dir, int world, String line) throws Exception {
        long deadline = System.nanoTime() + 60_000_000_000L;
        for (int r = 0; r < world; r++) {
            while (!said(dir, r).contains(line)) {
                if (System.nanoTime() > deadline) throw new AssertionError("rank " + r + " did not print '" + line + "': " + said(dir, r));
                Thread.sleep(50);
            }
        }
    }

    static void signal(String name, Process p) throws Exception {
        new ProcessBuilder("kill", "-" + name, Long.toString(p.pid())).inheritIO().start().waitFor();
    }
}
