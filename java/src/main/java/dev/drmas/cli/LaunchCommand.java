// LaunchCommand.java — `drmas launch --nproc N CONFIG [key=value ...]`: a torchrun for one machine.
// Starts N ranks of `drmas train` (`--eval`: `drmas eval`) as child JVMs (same java, JVM flags and class path as this one)
// on 127.0.0.1, forwards their output line by line with a [rankR] prefix, and when one rank fails
// stops the others and exits with its status. Several machines: run `drmas train` on each with
// the torchrun variables set (README, "Several GPUs and nodes"). Each rank's stdin is a pipe from
// the launcher that nobody writes to: when the launcher dies, even by kill -9 (no shutdown hook
// runs then), the pipe closes and the rank stops itself instead of training on unattended.
package dev.drmas.cli;

import dev.drmas.train.Trainer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

@Command(name = "launch", mixinStandardHelpOptions = true,
        description = {"Run `drmas train CONFIG` (with --eval: `drmas eval CONFIG`) as N data-parallel ranks on this machine (c10d over 127.0.0.1).",
                "Each rank is a child JVM; its output is prefixed with [rankR]. If one rank fails, the others are stopped."})
final class LaunchCommand implements java.util.concurrent.Callable<Integer> {
    @Option(names = "--nproc", required = true, paramLabel = "N", description = "number of ranks (processes)")
    int nproc;

    @Option(names = "--master-port", paramLabel = "PORT", description = "port of rank 0's store (default: a free one)")
    Integer masterPort;

    @Option(names = "--threads-per-rank", paramLabel = "T",
            description = "CPU threads per rank, passed as run.threads, OMP_NUM_THREADS and RAYON_NUM_THREADS (the tokenizer's) (default: cores / N, at least 1)")
    Integer threadsPerRank;

    @Option(names = "--eval", description = "start ranks of `drmas eval` instead of `drmas train`: the run's latest checkpoint evaluated,"
            + " each rank taking a share of the held-out tasks (e.g. the paper's avg@16 at the end: eval.k=16 eval.tasks=0)")
    boolean eval;

    @Option(names = "--allow-random", description = "with --eval: passed to every rank's `drmas eval` (evaluate models without weights)")
    boolean allowRandom;

    @Parameters(index = "0", paramLabel = "CONFIG", description = "run configuration (YAML)")
    Path config;

    @Parameters(index = "1..*", paramLabel = "KEY=VALUE", description = "overrides, as for train (eval)")
    List<String> overrides = new ArrayList<>();

    /** Set in a rank's (or an experiment job's) environment: its stdin is the launcher's pipe, whose end means the launcher is gone. */
    static final String WATCH_ENV = "DRMAS_LAUNCHER_STDIN";

    /**
     * In a rank started by launch: a daemon thread that reads stdin until the launcher's end of the
     * pipe closes, then ends this process (exit status 1, with a line saying why).
     */
    static void watchLauncher() {
        if (!"1".equals(System.getenv(WATCH_ENV))) return;
        Thread t = new Thread(() -> {
            try {
                byte[] sink = new byte[256];
                while (System.in.read(sink) >= 0) {
                    // the launcher writes nothing; read on until its end closes
                }
            } catch (IOException e) {
                // a broken pipe means the same: the launcher is gone
            }
            String rank = System.getenv("RANK");
            System.err.println(rank != null ? "drmas: the launcher of this rank (drmas launch) is gone; stopping rank " + rank
                    : "drmas: the experiment that started this job (drmas experiment) is gone; stopping");
            System.err.flush();
            Runtime.getRuntime().halt(1);  // no hooks: the lock, the files and the sockets go with the process
        }, "drmas-launcher-watch");
        t.setDaemon(true);
        t.start();
    }

    /** Where the ranks' output goes (the console; tests capture it). */
    static PrintStream out = System.out;
    /** Set by a pump when the ranks' output can no longer be written. */
    static volatile StdStreams.OutputFailure outputLost;  // (package-private: tests set it)

    @Override
    public Integer call() throws Exception {
        if (nproc < 1) throw new UserError("--nproc must be >= 1, got " + nproc);
        if (allowRandom && !eval) throw new UserError("--allow-random goes with --eval (drmas train starts from random weights where a model has no path)");
        if (java.nio.file.Files.isDirectory(config)) throw new UserError(config + ": is a folder, not a config file");
        if (!java.nio.file.Files.isRegularFile(config)) throw new UserError(config + ": no such config file");
        int port = masterPort != null ? masterPort : portPicker.getAsInt();
        if (port < 1 || port > 65535) throw new UserError("--master-port must be in 1..65535, got " + port);
        int threads = threadsPerRank != null ? threadsPerRank : Math.max(1, Runtime.getRuntime().availableProcessors() / nproc);
        if (threads < 1) throw new UserError("--threads-per-rank must be >= 1, got " + threads);
        List<Process> ranks = new java.util.concurrent.CopyOnWriteArrayList<>();  // the shutdown hook reads it too
        List<Thread> pumps = new java.util.concurrent.CopyOnWriteArrayList<>();
        outputLost = null;
        stopping = false;
        // a stopped launcher (SIGTERM, Ctrl-C) stops its ranks as they stop themselves: each finishes the step under way
        // and saves it, and the launcher waits for them (a kill -9 of the launcher still ends them at once: they watch it)
        Thread cleanup = new Thread(() -> {
            List<Process> now;
            synchronized (STARTING) {  // no rank starts after the list is taken (a restart on another port included)
                stopping = true;
                now = List.copyOf(ranks);
            }
            stopForShutdown(now, pumps);
        });
        Runtime.getRuntime().addShutdownHook(cleanup);
        try {
            for (int attempt = 1; ; attempt++) {
                for (int r = 0; r < nproc; r++) {
                    List<String> cmd = javaCommand();
                    cmd.add(eval ? "eval" : "train");
                    if (allowRandom) cmd.add("--allow-random");
                    cmd.add(config.toString());
                    cmd.add("run.threads=" + threads);  // first, so that an explicit override wins
                    cmd.addAll(overrides);
                    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
                    Map<String, String> env = pb.environment();
                    env.put("MASTER_ADDR", "127.0.0.1");
                    env.put("MASTER_PORT", Integer.toString(port));
                    env.put("RANK", Integer.toString(r));
                    env.put("LOCAL_RANK", Integer.toString(r));
                    env.put("WORLD_SIZE", Integer.toString(nproc));
                    env.put("LOCAL_WORLD_SIZE", Integer.toString(nproc));
                    env.put("OMP_NUM_THREADS", Integer.toString(threads));
                    // the tokenizers library's pool (a round's prompts are encoded on it): its share of the cores, not all of them
                    env.putIfAbsent("RAYON_NUM_THREADS", Integer.toString(threads));
                    env.put(WATCH_ENV, "1");  // stdin stays the default pipe from this process
                    if (masterPort == null) env.put(PICKED_PORT_ENV, "1");  // rank 0 then ends with PORT_TAKEN_STATUS if it is taken
                    // as ./drmas sets them: waiting threads sleep instead of spinning on shared cores
                    env.putIfAbsent("OMP_WAIT_POLICY", "PASSIVE");
                    env.putIfAbsent("OPENBLAS_THREAD_TIMEOUT", "4");
                    Process p;
                    synchronized (STARTING) {
                        if (stopping) return 143;  // the shutdown hook stops the ranks it saw; no more start
                        p = pb.start();
                        ranks.add(p);
                    }
                    pumps.add(pump(p, "[rank" + r + "] "));
                }
                out.println("drmas launch: " + nproc + " ranks (master 127.0.0.1:" + port + ", " + threads + " thread(s) each)");
                int status = await(!eval, ranks);
                for (Thread t : pumps) t.join(5000);
                // the port this launcher picked was free when it looked, and another program bound it before rank 0 could
                // (nothing ran yet: rank 0 stops at the store, the others wait to reach it): the ranks start again on another
                if (status == PORT_TAKEN_STATUS && masterPort == null && attempt < PORT_ATTEMPTS && !stopping) {
                    for (Process p : ranks) p.waitFor();  // (await stopped them)
                    int next = portPicker.getAsInt();
                    out.println("drmas launch: port " + port + " was taken by another program before rank 0 could bind it; starting the "
                            + nproc + " ranks again on port " + next);
                    ranks.clear();
                    pumps.clear();
                    port = next;
                    continue;
                }
                return status;
            }
        } finally {
            if (!stopping) ranks.forEach(Process::destroyForcibly);  // (stopping: the hook waits for their saves)
            try {
                Runtime.getRuntime().removeShutdownHook(cleanup);
            } catch (IllegalStateException shuttingDown) {
                // the hook is running already
            }
        }
    }

    /**
     * The statuses of a rank that stopped after its step's save, as the ranks agreed (StopRequest): 75 (a
     * tool could not go on), 130 and 143 (SIGINT, SIGTERM). The other ranks are ending the same way.
     */
    static boolean stoppedAfterSave(int status) {
        return status == Trainer.TOOL_STOP_STATUS || status == 130 || status == 143;
    }

    /** How long the other ranks have to end once one has stopped after its save (they left the same barrier). */
    static long stopGraceMillis = TimeUnit.SECONDS.toMillis(60);

    /**
     * Waits for every rank; on the first failure stops the rest. Returns 0 or the failed rank's status. In
     * training ({@code training}), a rank that may have stopped after its save (stoppedAfterSave) is no
     * failure of the others, which then end on their own with it: they are given stopGraceMillis to (their
     * metrics closed, their files synced) before they are stopped; a rank of them that failed instead has
     * its status returned. (A rank killed by a signal outside the training loop ends with 143 too: the
     * others then stop on their own within seconds, naming it, when its heartbeat stops.) Evaluation
     * ranks have no graceful stop: there any status but 0 stops the others at once.
     */
    static int await(boolean training, List<Process> ranks) throws InterruptedException {
        boolean[] done = new boolean[ranks.size()];
        int left = ranks.size();
        while (left > 0) {
            // nobody can see the ranks any more (a closed pipe, a full disk). While stopping, the ranks are saving their
            // step: they are let finish (the pumps drain their output), as a `| tee` that the same Ctrl-C ended would
            // otherwise cut every rank's save short
            if (outputLost != null && !stopping) {
                stopAll(ranks);
                throw outputLost;
            }
            for (int r = 0; r < ranks.size(); r++) {
                Process p = ranks.get(r);
                if (done[r] || !p.waitFor(50, TimeUnit.MILLISECONDS)) continue;
                done[r] = true;
                left--;
                if (p.exitValue() != 0 && !stopping) {  // (stopping: every rank ends on its own after its save)
                    if (training && stoppedAfterSave(p.exitValue()) && left > 0) return awaitStopping(ranks, done, r);
                    out.println("drmas launch: rank " + r + " exited with status " + p.exitValue() + "; stopping the other ranks");
                    stopAll(ranks);
                    return p.exitValue();
                }
            }
        }
        return 0;
    }

    /** Rank {@code first} stopped after its save: the others are waited for, then those left stopped. */
    private static int awaitStopping(List<Process> ranks, boolean[] done, int first) throws InterruptedException {
        int status = ranks.get(first).exitValue();
        out.println("drmas launch: rank " + first + " ended with status " + status + " (a stop the ranks agree on, after the step's "
                + "checkpoint); waiting for the other ranks to end");
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(stopGraceMillis);
        for (int r = 0; r < ranks.size(); r++) {
            if (done[r]) continue;
            Process p = ranks.get(r);
            long left = deadline - System.nanoTime();
            if (left <= 0 || !p.waitFor(left, TimeUnit.NANOSECONDS)) {
                out.println("drmas launch: rank " + r + " did not end within " + stopGraceMillis / 1000.0 + " s of rank " + first
                        + "; stopping the ranks left");
                stopAll(ranks);
                return status;
            }
            done[r] = true;
            int st = p.exitValue();
            if (st != 0 && !stoppedAfterSave(st)) {
                out.println("drmas launch: rank " + r + " exited with status " + st + " while the ranks stopped; stopping the other ranks");
                stopAll(ranks);
                return st;
            }
        }
        return status;
    }

    /**
     * The shutdown hook's work: every rank signalled and waited for, its last lines printed; a rank whose stop
     * failed (its save) makes the launcher end with its status (halt), not the signal's 143, which a scheduler or a
     * resubmitting script reads as "stopped after the step's checkpoint".
     */
    static void stopForShutdown(List<Process> ranks, List<Thread> pumps) {
        int failed = stopAndWait(ranks);
        for (Thread t : pumps) {
            try {
                t.join(5000);  // the ranks' last lines (where the checkpoint is) before the JVM ends
            } catch (InterruptedException e) {
                break;
            }
        }
        if (failed != 0) {
            out.flush();
            System.err.flush();
            halt.accept(failed);
        }
    }

    /** Ends this JVM at once with a status, from a shutdown hook (where System.exit would block); tests record it instead. */
    static java.util.function.IntConsumer halt = status -> Runtime.getRuntime().halt(status);

    /** Set by the shutdown hook: the ranks were asked to stop, and end as they finish. */
    static volatile boolean stopping;  // (package-private: tests set it)
    /** Held to start a rank and to take the shutdown hook's list of them, so that none starts unseen. */
    private static final Object STARTING = new Object();

    /**
     * SIGTERM to each process, then waits for all to end, however long their graceful stop takes (a
     * step and a checkpoint: the scheduler's own kill after its grace period bounds it). Used by the
     * shutdown hooks of `drmas launch` and `drmas experiment`. Returns the first status (in the list's
     * order) that is neither 0 nor a stop after the save (stoppedAfterSave), else 0.
     */
    static int stopAndWait(java.util.Collection<Process> processes) {
        List<Process> ps = List.copyOf(processes);  // (concurrent collections: their callers add to them meanwhile)
        // the signal alone: Process.destroy() also closes the pipes, and a child that sees its stdin end takes its
        // parent for dead and halts at once (the watch above), without saving
        for (Process p : ps) p.toHandle().destroy();
        int failed = 0;
        for (Process p : ps) {
            try {
                int status = p.waitFor();
                // 143, 130, 75: stopped after its save; anything else (1: the stop's save failed) is said
                if (status != 0 && !stoppedAfterSave(status)) {
                    System.err.println("drmas: process " + p.pid() + " exited with status " + status + " while stopping");
                    if (failed == 0) failed = status;
                }
            } catch (InterruptedException e) {
                p.destroyForcibly();
            }
        }
        return failed;
    }

    /**
     * SIGTERM, then after a grace period SIGKILL. The signal alone (as stopAndWait): Process.destroy()
     * also closes the pipes, and a rank that sees its stdin end halts at once (watchLauncher), so
     * there was no grace, and a failed rank's last lines still in the pipe (its error) were lost.
     */
    private static void stopAll(List<Process> ranks) throws InterruptedException {
        ranks.forEach(p -> p.toHandle().destroy());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        for (Process p : ranks) {
            long left = deadline - System.nanoTime();
            if (left <= 0 || !p.waitFor(left, TimeUnit.NANOSECONDS)) p.destroyForcibly();
        }
    }

    private static Thread pump(Process p, String prefix) {
        Thread t = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; ) {
                    if (outputLost != null) continue;  // drain, so the rank does not block on a full pipe
                    synchronized (LaunchCommand.class) {
                        try {
                            out.println(prefix + line);
                        } catch (StdStreams.OutputFailure e) {
                            outputLost = e;  // await() stops the ranks and reports it
                        }
                    }
                }
            } catch (IOException e) {
                // the rank is gone; its status says why
            }
        }, "drmas-launch-" + prefix.trim());
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** This JVM again: its java binary, its flags (native access, memory) and its class path, running Main. */
    static List<String> javaCommand() {
        // a debugger agent would make every child listen on the same port
        List<String> cmd = ChildJvm.command(a -> !a.startsWith("-agentlib:jdwp") && !a.startsWith("-javaagent"));
        cmd.add(Main.class.getName());
        return cmd;
    }

    /** Set in the ranks' environment when this launcher picked the port (no --master-port): see PORT_TAKEN_STATUS. */
    static final String PICKED_PORT_ENV = "DRMAS_LAUNCH_PICKED_PORT";
    /**
     * Rank 0's exit status when the port the launcher picked was taken before it could bind it (98: Linux's
     * EADDRINUSE); the launcher then starts the ranks again on another port, at most PORT_ATTEMPTS times in all.
     */
    static final int PORT_TAKEN_STATUS = 98;
    static final int PORT_ATTEMPTS = 3;
    /** Picks rank 0's port when --master-port is not given (tests replace it). */
    static java.util.function.IntSupplier portPicker = LaunchCommand::freePort;

    /** A port free now (the kernel's pick), and until another program binds it. */
    private static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UserError("cannot find a free port for rank 0's store (" + e.getMessage() + "); give one: --master-port P", e);
        }
    }
}
