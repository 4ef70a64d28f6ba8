// ExperimentCommand.java — `drmas experiment CONFIG [--modes ...] [--seeds N] [--pooling ...]`: the
// comparison the paper makes, run fairly: per seed one warm start (`drmas sft`, for models without a path;
// one for all seeds with --shared-warm-start), then one RL run per (mode, pooling) from that same warm start
// (or the models' own weights) (same initial weights, tasks and rollout seeds), each an
// ordinary run folder under output_dir/<experiment>/, with per-agent gradient norms on and logged at every step. Each job is
// a child JVM (as `drmas launch` starts them, ending with the experiment), its output in logs/; with --parallel, jobs running at
// once are spread over the GPUs (CUDA_VISIBLE_DEVICES, one job a GPU while there are enough); finished jobs are skipped when
// the experiment is run again with the same arguments and config (others are an error); at the end the
// experiment's report is written. A folder that holds a run of its own is refused.
package dev.drmas.cli;

import dev.drmas.algo.GlobalPooling;
import dev.drmas.algo.NormMode;
import dev.drmas.config.RunConfig;
import dev.drmas.metrics.RunReport;
import dev.drmas.train.Durable;
import dev.drmas.train.Trainer;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

@Command(name = "experiment", mixinStandardHelpOptions = true,
        description = {"Compare advantage modes fairly: per seed one warm start (models without a path), then one RL run per mode (and pooling)",
                "from it, in output_dir/<run.name>/<mode>-s<seed>/; then the experiment's report (report.html).",
                "Run it again to continue: finished runs are skipped (ones that ran with other arguments or another config are an error)."})
final class ExperimentCommand implements Callable<Integer> {
    /**
     * The marker of a job that finished; a job without it runs (again: training resumes its checkpoints). The
     * report reads it too (a run of trainer.epochs that has it trained to its end).
     */
    static final String DONE = RunReport.EXPERIMENT_DONE;
    /** The marker's line with the job's resolved config (its {@link #compared} settings as JSON), after its arguments. */
    static final String CONFIG_LINE = "config ";

    @Spec
    CommandSpec spec;

    @Parameters(index = "0", paramLabel = "CONFIG", description = "run configuration (YAML)")
    Path config;

    @Parameters(index = "1..*", paramLabel = "KEY=VALUE", description = "overrides for every run")
    List<String> overrides = new ArrayList<>();

    @Option(names = "--modes", split = ",", defaultValue = "grpo,drmas,agent-mean,agent-std",
            description = "advantage modes (default ${DEFAULT-VALUE})")
    List<String> modes;

    @Option(names = "--seeds", defaultValue = "3", description = "seeds 1..N (default ${DEFAULT-VALUE})")
    int seeds;

    @Option(names = "--pooling", split = ",", defaultValue = "trajectories",
            description = "global pooling of the group statistics: trajectories, rows or both (default ${DEFAULT-VALUE})")
    List<String> pooling;

    @Option(names = "--shared-warm-start", description = {"one warm start (sft-s1) for every seed instead of one per seed:",
            "the seeds then differ only in their RL runs (rollouts, task order); for when the warm start costs most"})
    boolean sharedWarmStart;

    @Option(names = "--warm-start", defaultValue = "auto", paramLabel = "WHEN", description = {"the supervised warm start before the RL runs:",
            "auto (default: only where a model has no path, i.e. trains from a random initialisation; pretrained models,",
            "as the paper's, start their RL runs from their own weights), always, or never"})
    String warmStartWhen;
    /** Whether the jobs include the warm starts (call() decides it from --warm-start and the models; tests set it). */
    boolean warmStart = true;

    @Option(names = "--parallel", defaultValue = "1", description = "jobs at once, the threads split among them (default 1)")
    int parallel;

    @Option(names = "--gpus", split = ",", paramLabel = "ID", description = {"GPUs to spread the jobs over, as CUDA_VISIBLE_DEVICES names "
            + "them: a job starting runs on the one with the fewest jobs", "(default, with --parallel > 1 and run.device not cpu: this "
            + "process's CUDA_VISIBLE_DEVICES, else every GPU the CUDA runtime sees)"})
    List<String> gpus;

    /** The GPUs the jobs are spread over (empty: the jobs inherit this process's CUDA_VISIBLE_DEVICES), and the jobs on each. */
    private List<String> devices = List.of();
    private int[] onDevice = new int[0];  // guarded by `starting`

    /** The jobs' processes now running, with their jobs, for the shutdown hook and a failure's stop. */
    private final Map<Process, Job> running = new java.util.concurrent.ConcurrentHashMap<>();
    /** Each job's exit status once its process has ended (a job skipped as done has none). */
    private final Map<Job, Integer> exitStatus = new java.util.concurrent.ConcurrentHashMap<>();
    /** Each job's future while the jobs run: the shutdown hook waits for their threads (a done marker being written). */
    private volatile Map<Job, CompletableFuture<Void>> jobFutures = Map.of();
    /** Held while a job checks `stopping` and starts, and while a stop takes its list of jobs: none starts after it. */
    private final Object starting = new Object();
    /** Set by the shutdown hook: the jobs were asked to stop and end as they finish their saves. */
    private volatile boolean stopping;
    /** Set by the shutdown hook alone (a failed job sets stopping too): every running job has had its SIGTERM. */
    private volatile boolean signalled;
    /** Each job's settings ({@link #compared}) from the config file as it is at the experiment's start, by job name. */
    private final Map<String, Map<String, String>> settings = new java.util.concurrent.ConcurrentHashMap<>();
    /** What runs a job, its arguments appended: this JVM's `drmas` (tests put a script in its place). */
    java.util.function.Supplier<List<String>> jobCommand = LaunchCommand::javaCommand;

    /** One job: a warm start or an RL run, as a command line of `drmas`. */
    record Job(String name, List<String> args, Job after) {
    }

    @Override
    public Integer call() throws Exception {
        if (seeds < 1) throw new UserError("--seeds must be >= 1, got " + seeds);
        if (parallel < 1) throw new UserError("--parallel must be >= 1, got " + parallel);
        for (String m : modes) parse(NormMode.class, m, "--modes");
        for (String p : pooling) parse(GlobalPooling.class, p, "--pooling");
        // a value listed twice is one job twice under one name: trained twice in turn, or with --parallel the second
        // meets the first's run lock
        distinct(modes, "--modes");
        distinct(pooling, "--pooling");
        RunConfig cfg = RunCommand.loadConfig(config, overrides);  // checks the config and the overrides once, here
        if (!cfg.metrics().jsonl()) throw new UserError("metrics.jsonl=false: the experiment's report reads each run's metrics.jsonl");
        Path root = cfg.run().runDir();
        for (String own : new String[] {"metrics.jsonl", "config.yaml", "checkpoints", "sft"}) {
            // an experiment inside a run folder (the demo's: runs/math-toy-drmas) hides its runs from the
            // report of that folder, and `demo --fresh` there would delete them
            if (Files.exists(root.resolve(own))) {
                throw new UserError(root + " holds a run of its own (" + own + "); the experiment's runs go in sub-folders of "
                        + "output_dir/run.name: give it a folder of its own, e.g. run.name=" + root.getFileName() + "-experiment");
            }
        }
        int threads = Math.max(1, (cfg.run().threads() > 0 ? cfg.run().threads() : Runtime.getRuntime().availableProcessors()) / parallel);
        devices = devices(gpus, cfg.run().device(), parallel, System.getenv("CUDA_VISIBLE_DEVICES"), dev.drmas.bindings.LibDrmas::cudaDeviceCount);
        onDevice = new int[devices.size()];
        warmStart = switch (warmStartWhen.trim().toLowerCase(java.util.Locale.ROOT)) {
            case "always" -> true;
            case "never" -> false;
            // a pretrained model fine-tuned on scripted demonstrations (30% of them wrong on purpose) would not be the
            // model the comparison is about, and its warm start would not fit a GPU at the paper's sizes
            case "auto" -> cfg.models().values().stream().anyMatch(m -> m.path() == null);
            default -> throw new UserError("--warm-start must be auto, always or never, got '" + warmStartWhen + "'");
        };
        List<Job> jobs = jobs(root, threads);
        for (Job j : jobs) settings.put(j.name(), compared(resolve(j)));  // what each job runs with now, the YAML as it is now
        try (var lock = RunCommand.lock(cfg)) {  // one experiment at a time in a folder; each job locks its own run
            return run(root, jobs, threads);
        }
    }

    /**
     * The shutdown hook's work (Ctrl-C, SIGTERM to the experiment): no job starts from here on, and each
     * running one is signalled once (a train job then stops after saving its step) and waited for.
     */
    void stopForShutdown() {
        Map<Process, Job> now;
        synchronized (starting) {  // no job starts after the list is taken
            stopping = true;
            signalled = true;
            now = Map.copyOf(running);
        }
        int failed = LaunchCommand.stopAndWait(now.keySet());
        // the jobs' threads, which mark a job that finished meanwhile done (the JVM ends when this hook returns): also
        // one whose process ended just before the list was taken, and is writing its marker now
        awaitQuietly(jobFutures.values());
        // a job whose stop failed (its save): the experiment ends with its status, not the signal's 143 (as launch)
        if (failed != 0) {
            System.out.flush();
            System.err.flush();
            LaunchCommand.halt.accept(failed);
        }
    }

    private int run(Path root, List<Job> jobs, int threads) throws IOException {
        Files.createDirectories(root.resolve("logs"));
        PrintWriter out = spec.commandLine().getOut();
        long warmStarts = jobs.stream().filter(j -> j.name().startsWith("sft-")).count();
        long runsPerSeed = (jobs.size() - warmStarts) / seeds;
        String shape = !warmStart ? String.format("%d seeds x %d runs from the models' own weights (no warm start)", seeds, runsPerSeed)
                : sharedWarmStart ? String.format("%d seeds x %d runs from 1 warm start", seeds, runsPerSeed)
                : String.format("%d seeds x (1 warm start + %d runs)", seeds, runsPerSeed);
        out.printf("drmas experiment: %s = %d jobs, %d at a time, %d threads each%s, in %s%n",
                shape, jobs.size(), parallel, threads, devices.isEmpty() ? "" : ", on GPUs " + String.join(",", devices), root);
        out.flush();
        for (Job j : jobs) checkDoneWithSameArguments(root, j, settings.get(j.name()));  // before anything runs
        AtomicInteger finished = new AtomicInteger();
        Map<Job, CompletableFuture<Void>> done = new java.util.concurrent.ConcurrentHashMap<>();
        jobFutures = done;
        ExecutorService pool = Executors.newFixedThreadPool(parallel);
        // Ctrl-C or kill: the jobs end with the experiment, each after saving the step under way (a train job's stop)
        Thread cleanup = new Thread(this::stopForShutdown);
        Runtime.getRuntime().addShutdownHook(cleanup);
        try {
            // the first job that fails ends the wait at once (allOf alone would wait for every other job to finish)
            CompletableFuture<Void> firstFailure = new CompletableFuture<>();
            for (Job j : jobs) {
                CompletableFuture<Void> before = j.after() == null ? CompletableFuture.completedFuture(null) : done.get(j.after());
                CompletableFuture<Void> f = before.thenRunAsync(() -> run(root, j, threads, jobs.size(), finished, out), pool);
                f.whenComplete((v, failure) -> {
                    if (failure != null) firstFailure.completeExceptionally(failure);
                });
                done.put(j, f);
            }
            CompletableFuture.anyOf(CompletableFuture.allOf(done.values().toArray(CompletableFuture[]::new)), firstFailure).join();
        } catch (java.util.concurrent.CompletionException e) {
            // one job failed or stopped: no other starts; RL runs stop after saving their step (as on Ctrl-C), so
            // that the same command resumes them where they were; a warm start (sft), which has no graceful stop
            // and would lose all its work, is let finish
            Map<Process, Job> now;
            boolean hookStopping;
            synchronized (starting) {
                hookStopping = signalled;
                stopping = true;
                now = Map.copyOf(running);
            }
            // the shutdown hook signalled every job already and waits for their saves: a job that ended from it (143)
            // lands here, and a second SIGTERM would make the others halt without saving (StopRequest). They are waited
            // for here too: the pool's shutdown below interrupts their threads, which kill a job they wait for
            if (hookStopping) {
                for (Process p : now.keySet()) {
                    try {
                        p.waitFor();
                    } catch (InterruptedException interrupted) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
                throw e.getCause() instanceof RuntimeException re ? re : e;
            }
            List<Process> rl = now.entrySet().stream().filter(x -> !isWarmStart(x.getValue())).map(Map.Entry::getKey).toList();
            List<Job> warm = now.values().stream().filter(ExperimentCommand::isWarmStart).toList();
            if (!now.isEmpty()) {
                out.println("drmas experiment: a job ended (below); " + (rl.isEmpty() ? "" : "stopping the " + rl.size()
                        + " RL run(s) running after their step's checkpoint") + (rl.isEmpty() || warm.isEmpty() ? "" : "; ")
                        + (warm.isEmpty() ? "" : "waiting for the " + warm.size() + " warm start(s) running to finish"));
                out.flush();
                LaunchCommand.stopAndWait(rl);
            }
            // every job's thread has ended or ends now (none starts): each marks its job done or says why it failed. Said
            // beside the first failure: a warm start's failure, and an RL run's that did not end after its save (its save
            // failed when it was stopped, or it failed on its own meanwhile); a job that waited for a failed one fails
            // with that one's error, said once
            Throwable primary = e.getCause();
            java.util.Set<Throwable> said = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
            said.add(primary);
            boolean alsoFailed = false;
            for (Job j : jobs) {
                Throwable x = done.get(j).handle((v, t) -> t).join();
                Throwable cause = x instanceof java.util.concurrent.CompletionException && x.getCause() != null ? x.getCause() : x;
                if (cause == null || !said.add(cause)) continue;
                Integer status = exitStatus.get(j);
                if (!isWarmStart(j) && status != null && LaunchCommand.stoppedAfterSave(status)) continue;  // stopped after its save
                out.println("drmas experiment: also " + cause.getMessage());
                alsoFailed = true;
            }
            out.flush();
            // a job that failed beside one that stopped after its save (a tool's 75): the experiment failed
            if (alsoFailed && primary instanceof UserError u && u.status != 1) throw new UserError(u.getMessage(), u, 1);
            throw e.getCause() instanceof RuntimeException re ? re : e;
        } finally {
            // the jobs' threads end once their processes have (none starts now): a thread that marks its job done is let
            // finish (shutdownNow would interrupt its file writes: the job would run again next time)
            pool.shutdown();
            try {
                if (!pool.awaitTermination(stopping ? 30 : 0, TimeUnit.SECONDS)) pool.shutdownNow();
            } catch (InterruptedException interrupted) {
                pool.shutdownNow();
                Thread.currentThread().interrupt();
            }
            jobFutures = Map.of();
            if (!stopping) running.keySet().forEach(Process::destroyForcibly);  // (stopping: the hook waits for the jobs' saves)
            try {
                Runtime.getRuntime().removeShutdownHook(cleanup);
            } catch (IllegalStateException shuttingDown) {
                // the hook is running already
            }
        }
        Path report;
        try {
            report = RunReport.write(List.of(root), root.resolve("report.html"),
                    w -> spec.commandLine().getErr().println("drmas experiment: warning: " + w));
        } catch (IllegalArgumentException | java.io.UncheckedIOException e) {
            throw new UserError("the report of " + root + ": " + e.getMessage(), e);
        }
        out.println("drmas experiment: report " + report.toAbsolutePath());
        out.flush();
        return 0;
    }

    /** Per seed: the warm start (or seed 1's, when shared), then every (mode, pooling) from it. */
    List<Job> jobs(Path root, int threads) {
        List<String> common = new ArrayList<>(overrides);
        common.add("run.output_dir=" + root);
        common.add("run.threads=" + threads);
        common.add("metrics.progress_bar=false");
        List<Job> jobs = new ArrayList<>();
        Job warm = null;
        for (int seed = 1; seed <= seeds; seed++) {
            if (warmStart && (warm == null || !sharedWarmStart)) {
                List<String> sft = new ArrayList<>(List.of("sft", config.toString()));
                sft.addAll(common);
                sft.addAll(List.of("run.name=sft-s" + seed, "run.seed=" + seed));
                warm = new Job("sft-s" + seed, sft, null);
                jobs.add(warm);
            }
            String sftName = warm == null ? null : warm.name();
            for (String pool : pooling) {
                for (String mode : modes) {
                    String name = label(mode, pool) + "-s" + seed;
                    List<String> train = new ArrayList<>(List.of("train", config.toString()));
                    train.addAll(common);
                    train.addAll(List.of("run.name=" + name, "run.seed=" + seed, "algorithm.mode=" + mode,
                            "algorithm.global_pooling=" + pool, "trainer.grad_norm_per_agent=true", "trainer.log_freq=1"));
                    if (warm != null) train.add("run.warm_start=" + root.resolve(sftName).resolve("sft").resolve("models"));
                    jobs.add(new Job(name, train, warm));
                }
            }
        }
        return jobs;
    }

    /**
     * A run's name: the mode, and the pooling when it is not the default, as the report labels runs: a name that
     * depended on the other poolings listed would give GRPO a second folder (and a second training) when a pooling
     * is added to an experiment later, which the report then refuses as one seed twice.
     */
    static String label(String mode, String pool) {
        return mode + (pool.equals(GlobalPooling.TRAJECTORIES.configName()) ? "" : "-" + pool);
    }

    private void run(Path root, Job j, int threads, int total, AtomicInteger finished, PrintWriter out) {
        Path dir = root.resolve(j.name());
        if (Files.isRegularFile(dir.resolve(DONE))) {
            out.printf("[%d/%d] %s: done before, skipped%n", finished.incrementAndGet(), total, j.name());
            out.flush();
            return;
        }
        if (j.name().startsWith("sft-") && Files.isDirectory(dir.resolve("sft").resolve("models"))) {
            // a warm start saved whole (its folder is renamed in at the end) by a job stopped before its marker: a second
            // `drmas sft` would train those weights again on the same demonstrations, which drmas sft refuses
            out.printf("[%d/%d] %s: its warm start was saved before (%s), kept%n", finished.incrementAndGet(), total, j.name(),
                    dir.resolve("sft").resolve("models"));
            out.flush();
            return;
        }
        Path log = root.resolve("logs").resolve(j.name() + ".log");
        long t0 = System.nanoTime();
        int code;
        try {
            List<String> cmd = new ArrayList<>(jobCommand.get());
            cmd.addAll(j.args());
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
            pb.environment().put("OMP_NUM_THREADS", Integer.toString(threads));
            // the tokenizer's pool too (as launch's ranks): else each of the parallel jobs' pools takes every core
            pb.environment().putIfAbsent("RAYON_NUM_THREADS", Integer.toString(threads));
            // kill -9 runs no hook: the job watches its stdin, a pipe from here, and stops when it closes (as launch's ranks)
            pb.environment().put(LaunchCommand.WATCH_ENV, "1");
            // the settings it starts with, the config file as it is at its start (an edit while the experiment runs is the
            // later jobs' config): its marker keeps them
            Map<String, String> startedWith = compared(resolve(j));
            Process p;
            int gpu = -1;
            synchronized (starting) {
                if (stopping) return;  // the experiment is stopping: no job starts (the stop waits only for those it saw)
                if (!devices.isEmpty()) {  // the GPU with the fewest jobs now (the first of those): one job a GPU while there are enough
                    gpu = 0;
                    for (int d = 1; d < onDevice.length; d++) if (onDevice[d] < onDevice[gpu]) gpu = d;
                    pb.environment().put("CUDA_VISIBLE_DEVICES", devices.get(gpu));
                }
                // appended: a job run again (after a stop or a failure) keeps the log that says why it stopped, each attempt
                // under a line of its own
                Files.writeString(log, (Files.exists(log) && Files.size(log) > 0 ? "\n" : "") + "=== drmas experiment: " + j.name()
                        + " started " + java.time.Instant.now().truncatedTo(java.time.temporal.ChronoUnit.SECONDS)
                        + (gpu < 0 ? "" : " on GPU " + devices.get(gpu)) + " ===\n",
                        StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
                p = pb.start();
                running.put(p, j);
                if (gpu >= 0) onDevice[gpu]++;
            }
            try {
                code = p.waitFor();
                exitStatus.put(j, code);
            } catch (InterruptedException e) {
                p.destroyForcibly();
                Thread.currentThread().interrupt();
                throw new UserError("interrupted while " + j.name() + " ran");
            } finally {
                running.remove(p);
                if (gpu >= 0) {
                    synchronized (starting) {
                        onDevice[gpu]--;
                    }
                }
            }
            if (code != 0) {
                synchronized (starting) {
                    stopping = true;  // before this job's thread can take the next one
                }
                String tail = tail(log, 5);
                if (code == Trainer.TOOL_STOP_STATUS) {  // a service the run needs is gone (the retrieval server): it saved its step
                    throw new UserError(j.name() + " stopped after saving its step (exit 75: a service it needs is gone); the same "
                            + "command resumes the experiment once it is back. Its log is " + log + ":\n" + tail, null, Trainer.TOOL_STOP_STATUS);
                }
                throw new UserError(j.name() + " failed (exit " + code + "); its log is " + log + ":\n" + tail);
            }
            // whole or not there (a power loss or a kill while writing left an empty marker, read as other arguments)
            Durable.createFolders(dir);
            Path tmp = dir.resolve(DONE + ".tmp");
            Files.writeString(tmp, marker(j, startedWith));
            Durable.syncFile(tmp);
            Files.move(tmp, dir.resolve(DONE), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            Durable.syncFolder(dir);
        } catch (IOException e) {
            throw new UserError(j.name() + ": " + e.getMessage() + " (log " + log + ")", e);
        }
        out.printf(Locale.ROOT, "[%d/%d] %s: done in %.1f min%s%n", finished.incrementAndGet(), total, j.name(),
                (System.nanoTime() - t0) / 60e9, RunReport.oneLine(dir));
        out.flush();
    }

    /** Waits up to 30 s in all for {@code fs} to complete, however each ends. */
    private static void awaitQuietly(java.util.Collection<CompletableFuture<Void>> fs) {
        try {
            CompletableFuture.allOf(fs.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            // its failure is the main thread's to report; a thread still busy after 30 s is not waited for
        }
    }

    /**
     * The last {@code n} lines of {@code log}, from its last 64 KiB (a log may be large) decoded
     * leniently (a job's tools may write bytes that are not UTF-8).
     */
    static String tail(Path log, int n) throws IOException {
        byte[] bytes;
        try (var ch = java.nio.channels.FileChannel.open(log, StandardOpenOption.READ)) {
            long size = ch.size(), from = Math.max(0, size - (64 << 10));
            java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate((int) (size - from));
            while (b.hasRemaining() && ch.read(b, from + b.position()) >= 0) {
                // read to the end
            }
            bytes = java.util.Arrays.copyOf(b.array(), b.position());
        }
        List<String> lines = new String(bytes, StandardCharsets.UTF_8).lines().toList();
        return String.join("\n", lines.subList(Math.max(0, lines.size() - n), lines.size()));
    }

    /**
     * The GPUs to spread the jobs over, as CUDA_VISIBLE_DEVICES names them: {@code given} (--gpus) when set; otherwise,
     * when several jobs run at once on a device that may be CUDA, the entries of {@code visible} (this process's
     * CUDA_VISIBLE_DEVICES) or, unset, 0 to {@code deviceCount} - 1. Empty: the jobs inherit this process's environment
     * (each single-process job runs on the first GPU it sees, so without this every parallel job shares GPU 0).
     */
    static List<String> devices(List<String> given, dev.drmas.config.RunSettings.Device device, int parallel, String visible,
                                java.util.function.IntSupplier deviceCount) {
        if (given != null) {
            if (device == dev.drmas.config.RunSettings.Device.CPU) {
                throw new UserError("--gpus " + String.join(",", given) + ": run.device is cpu; set run.device=cuda (or auto), or leave --gpus out");
            }
            java.util.Set<String> seen = new java.util.HashSet<>();
            for (String g : given) {
                if (g.isBlank() || !g.strip().equals(g) || g.contains("=")) {
                    throw new UserError("--gpus: '" + g + "' is not a GPU (a CUDA_VISIBLE_DEVICES entry: an index such as 0, or a GPU-/MIG- UUID)");
                }
                if (!seen.add(g)) throw new UserError("--gpus: GPU " + g + " is given twice");
            }
            return List.copyOf(given);
        }
        if (parallel < 2 || device == dev.drmas.config.RunSettings.Device.CPU) return List.of();
        if (visible != null) {
            List<String> ids = new ArrayList<>();
            for (String v : visible.split(",")) if (!v.isBlank()) ids.add(v.strip());
            return ids;
        }
        int n = deviceCount.getAsInt();
        List<String> ids = new ArrayList<>();
        for (int d = 0; d < n; d++) ids.add(Integer.toString(d));
        return ids;
    }

    /** A warm start (`drmas sft`): it has no graceful stop. */
    static boolean isWarmStart(Job j) {
        return !j.args().isEmpty() && j.args().getFirst().equals("sft");
    }

    /** Whether {@code dir} holds an experiment (its logs/, or a finished job): not a folder for one run. */
    static boolean holdsExperiment(Path dir) throws IOException {
        if (Files.isDirectory(dir.resolve("logs"))) return true;
        if (!Files.isDirectory(dir)) return false;
        try (var children = Files.list(dir)) {
            return children.anyMatch(c -> Files.isRegularFile(c.resolve(DONE)));
        }
    }

    /**
     * A finished job is skipped only when it ran with the arguments it would run with now (the
     * threads aside) and, where its marker keeps them (a drmas from before that kept the arguments
     * alone), the same resolved settings ({@code now}, null: not compared): toggling
     * --shared-warm-start, changing an override or editing the config file would otherwise mix runs
     * of two set-ups in one report.
     */
    static void checkDoneWithSameArguments(Path root, Job j, Map<String, String> now) throws IOException {
        Path done = root.resolve(j.name()).resolve(DONE);
        if (!Files.isRegularFile(done)) return;
        String text = Files.readString(done);
        int at = text.lastIndexOf("\n" + CONFIG_LINE);
        List<String> before = arguments((at < 0 ? text : text.substring(0, at)).strip()), nowArgs = arguments(j.args().toString());
        if (!before.equals(nowArgs)) {
            List<String> gone = new ArrayList<>(before), added = new ArrayList<>(nowArgs);
            gone.removeAll(nowArgs);
            added.removeAll(before);
            throw new UserError(j.name() + " finished with other arguments (" + done + "): then " + gone + ", now " + added
                    + "; give the experiment another run.name, or delete " + root.resolve(j.name()) + " to run it again");
        }
        if (at < 0 || now == null) return;
        Map<String, String> then;
        try {
            then = MARKER_JSON.readValue(text.substring(at + 1 + CONFIG_LINE.length()).strip(),
                    new com.fasterxml.jackson.core.type.TypeReference<java.util.TreeMap<String, String>>() { });
        } catch (com.fasterxml.jackson.core.JacksonException e) {
            throw new UserError(done + ": its config line is not JSON (" + e.getOriginalMessage() + "); delete " + root.resolve(j.name())
                    + " to run the job again", e);
        }
        java.util.TreeSet<String> keys = new java.util.TreeSet<>(then.keySet());
        keys.addAll(now.keySet());
        List<String> differ = new ArrayList<>();
        for (String k : keys) {
            if (java.util.Objects.equals(then.get(k), now.get(k))) continue;
            differ.add(k + " (then " + shown(then.get(k)) + ", now " + shown(now.get(k)) + ")");
        }
        if (differ.isEmpty()) return;
        int shownKeys = Math.min(differ.size(), 10);
        throw new UserError(j.name() + " finished with another config (" + done + "): " + String.join("; ", differ.subList(0, shownKeys))
                + (differ.size() > shownKeys ? "; and " + (differ.size() - shownKeys) + " more" : "") + ". Its runs would mix "
                + "with ones of the config as it is now in one report: undo the change, give the experiment another run.name, or "
                + "delete " + root.resolve(j.name()) + " to run it again");
    }

    private static final com.fasterxml.jackson.databind.ObjectMapper MARKER_JSON = new com.fasterxml.jackson.databind.ObjectMapper();

    /**
     * Settings that may differ between a job's runs without changing what it trains: the threads (--parallel), where
     * the experiment's folder is, the resume policy, what is logged and how often (metrics.*, trainer.log_freq), and the
     * address of a retrieval service (its index and corpus are compared).
     */
    static final java.util.regex.Pattern UNCOMPARED = java.util.regex.Pattern.compile(
            "run\\.(threads|output_dir|resume)|trainer\\.log_freq|metrics\\..*|orchestra\\.options\\.retriever\\.url");

    /** A job's resolved config: the config file as it is now, with the job's overrides. */
    private RunConfig resolve(Job j) {
        try {
            return RunConfig.load(config, j.args().subList(2, j.args().size()));  // its arguments after `train|sft CONFIG`
        } catch (dev.drmas.config.ConfigException e) {
            throw new UserError(j.name() + ": " + e.getMessage(), e);
        }
    }

    /** The settings a finished job's marker keeps: every key of {@code cfg} but the UNCOMPARED ones, as config.yaml writes its value. */
    static Map<String, String> compared(RunConfig cfg) {
        Map<String, String> out = new java.util.TreeMap<>();
        cfg.flat().forEach((k, v) -> {
            if (!UNCOMPARED.matcher(k).matches()) out.put(k, String.valueOf(v));
        });
        return out;
    }

    /** A finished job's marker: its arguments, then (where known) its settings as one line of JSON. */
    static String marker(Job j, Map<String, String> settings) throws IOException {
        return j.args().toString() + "\n" + (settings == null ? "" : CONFIG_LINE + MARKER_JSON.writeValueAsString(settings) + "\n");
    }

    /** A value for a message: absent as such, a long one (a prompt) by its start and length. */
    private static String shown(String v) {
        if (v == null) return "not set";
        String line = v.lines().findFirst().orElse("");
        return line.length() <= 60 && line.length() == v.length() ? v : line.substring(0, Math.min(60, line.length())) + "... ("
                + v.length() + " characters)";
    }

    /**
     * A job's arguments as DONE stores them ("[train, c.yaml, k=v, ...]"), without run.threads: a finished job is not
     * run again because --parallel changed (the thread count changes only the last bits of LibTorch's sums; README);
     * nor because of the trainer.log_freq=1 that experiments force since (an earlier job's marker lacks it), which
     * changes what is logged, not what is trained.
     */
    private static List<String> arguments(String stored) {
        String inner = stored.startsWith("[") && stored.endsWith("]") ? stored.substring(1, stored.length() - 1) : stored;
        List<String> out = new ArrayList<>();
        for (String a : inner.split(", ")) if (!a.startsWith("run.threads=") && !a.equals("trainer.log_freq=1")) out.add(a);
        return out;
    }

    private static void distinct(List<String> values, String option) {
        java.util.Set<String> seen = new java.util.HashSet<>();
        for (String v : values) if (!seen.add(v)) throw new UserError(option + ": '" + v + "' is given twice");
    }

    private static <E extends Enum<E>> void parse(Class<E> type, String value, String option) {
        for (E c : type.getEnumConstants()) {
            if (((dev.drmas.algo.ConfigEnum) c).configName().equals(value)) return;
        }
        List<String> valid = new ArrayList<>();
        for (E c : type.getEnumConstants()) valid.add(((dev.drmas.algo.ConfigEnum) c).configName());
        throw new UserError(option + ": '" + value + "' is not one of " + String.join(", ", valid));
    }
}
