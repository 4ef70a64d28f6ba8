// Trainer.java — one run of multi-agent RL (ARCHITECTURE §2, §3a): the loop and its schedule
// (evaluation, checkpoints, resume, the cross-rank weight check). A step reads as its data flow:
// rollout (the workflow's orchestra, generation batched per model) → RolloutBatch (rewards →
// columnar rows) → advantages (native kernel) → a PPO update per model → StepMetrics. What depends
// on the task family comes from its Workload (dev.drmas.workflow); the warm start and evaluation
// are classes of their own.
// Data-parallel (dev.drmas.dist): each rank rolls out a contiguous share of the step's tasks, with
// draws keyed by the global trajectory index, normalises its own groups, and joins the collectives
// of PpoUpdater; batch metrics are merged across ranks; rank 0 alone writes files.
package dev.drmas.train;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.drmas.agent.Episode;
import dev.drmas.algo.Advantages;
import dev.drmas.config.ConfigException;
import dev.drmas.config.EvalConfig;
import dev.drmas.config.RunConfig;
import dev.drmas.dist.Collective;
import dev.drmas.dist.DistEnv;
import dev.drmas.dist.ProcessGroup;
import dev.drmas.env.Task;
import dev.drmas.metrics.JsonlSink;
import dev.drmas.metrics.MetricsLogger;
import dev.drmas.metrics.CudaPeakMemory;
import dev.drmas.metrics.PeakMemory;
import dev.drmas.metrics.PhaseTimer;
import dev.drmas.workflow.RunStop;
import dev.drmas.workflow.Workflows;
import dev.drmas.workflow.Workload;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import java.util.Set;
import org.bytedeco.pytorch.global.torch;

public final class Trainer implements AutoCloseable {
    private final RunConfig cfg;
    private final Path runDir;
    private final Checkpoints checkpoints;  // runDir/checkpoints
    private final PrintStream log;
    private final Workload workload;
    private final Policies policies;
    private final TaskStream tasks;
    private final Collective dist;
    private final Path checkpoint;  // the one resumed, or null
    private final List<String> trainingChanges;  // changes since the checkpoint that only training cannot honour (ResumeCheck)
    private long step;  // training steps completed
    private boolean announced;  // announceStart() has printed
    private boolean evalBudgetChecked;  // the evaluation's batch has passed GenerationBudget (at open where training evaluates)
    private final CudaPeakMemory gpuMemory;  // the device's allocator peaks on a CUDA run, else null

    private Trainer(RunConfig cfg, PrintStream log, Path checkpoint, Collective dist, Runnable openedHook) {
        this.cfg = cfg;
        this.dist = dist;
        this.runDir = cfg.run().runDir();
        this.checkpoints = new Checkpoints(runDir.resolve("checkpoints"));
        this.log = log;
        this.evalBudgetChecked = cfg.trainer().evalFreq() > 0;
        torch.set_num_threads(cfg.run().threads() > 0 ? cfg.run().threads() : Runtime.getRuntime().availableProcessors());
        try {
            Durable.createFolders(runDir);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create the run folder " + runDir + " (run.output_dir/run.name)", e);
        }
        this.workload = Workflows.open(cfg, log);
        long dataPos;
        try {
            SamplingStreams.check(cfg, workload);
            // what the checkpoint cannot honour stops every rank; what changed safely rank 0 logs
            // (what only training needs fixed, the seed and the data, train() checks: eval and sft may change them)
            trainingChanges = checkpoint == null ? List.of()
                    : ResumeCheck.check(cfg, checkpoint, runDir, dist.isMaster() ? log : new PrintStream(OutputStream.nullOutputStream()));
            long[] start = startOf(checkpoint);
            // rank 0 alone writes what the run folder lacks (the built-in tokenizer), which the others then read; but
            // every rank opens the models at the same point, after the barrier: opening takes part in collectives (a
            // sharded optimiser's resume spreads its fp32 master weights over the ranks' weights), which pair up only
            // when every rank runs them (rank 0 opening alone paired its spreading with the others' barrier: a hang).
            // A ready point, not a plain barrier: a rank that failed so far (here or in open()) stops the others with
            // its reason (Collective.awaitReady), where a barrier kept them until distributed.timeout_s
            SameConfig.require(cfg, dist);  // ranks with other settings would make other collectives, or train apart
            if (dist.isMaster()) Policies.prepareRunFolder(cfg, runDir);
            dist.awaitReady("rank 0's setup of the run folder");
            // each rank found its checkpoint (or none) itself: ranks that start from different ones would train apart,
            // and their collectives would not pair up (already those of opening the models: a resumed sharded optimiser
            // spreads its masters, a fresh one does not), so this is checked before the models open
            dist.requireSame(new double[] {start[0], start[1]}, 0, "the [step, data_position] the run starts from", "this rank "
                    + (checkpoint != null ? "resumed " + checkpoint : "found no checkpoint") + "; every rank must see the same "
                    + "run folder: a rank that found another checkpoint, or none, would train from another step");
            this.step = start[0];
            dataPos = start[1];
            Policies ps = Policies.open(cfg, runDir, checkpoint, cfg.run().warmStart() != null ? cfg.run().warmStart() : WarmStart.weights(runDir), dist);
            try {
                // the evaluation's batch where training evaluates; `drmas eval` of a run without checks it in evaluate()
                checkGenerationBudget(ps, evalBudgetChecked ? workload.test().size() : 0);
                openedHook.run();
                // no rank goes on to the collectives of training (or evaluation) while another could not open its models
                dist.awaitReady("every rank's opening of its models");
            } catch (RuntimeException | Error e) {
                ps.close();
                throw e;
            }
            this.policies = ps;
        } catch (RuntimeException | Error e) {
            workload.close();  // the retriever's index
            throw e;
        }
        this.checkpoint = checkpoint;
        // a checkpoint is announced by the first use that accepts it: train() after its own refusals (the changes only
        // training cannot honour, a lost KL reference), evaluate() or sft(); "resumed" must not precede a refusal
        if (checkpoint == null) announceStart();
        if (dist.isMaster()) for (String n : policies.notes) log.println("drmas: " + n);
        if (dist.isMaster()) {
            for (String m : policies.missingReferences.values()) {
                log.println("drmas: warning: ppo.reference_model: " + m + "; evaluation does without it, training refuses to");
            }
            EvalConfig ec = cfg.eval();
            if (cfg.trainer().evalFreq() > 0 && workload.test().isEmpty()) {
                log.println("drmas: warning: trainer.eval_freq is " + cfg.trainer().evalFreq() + " but the workload has no"
                        + " held-out tasks (its data's test split is empty): no eval/ metric will be logged");
            }
            if (ec.temperature() == 0 && ec.samplesPerTask() > 1) {
                // greedy decoding draws nothing: every sample of a task is the same reply
                log.println("drmas: warning: eval.temperature is 0 (greedy): the " + ec.samplesPerTask() + " samples of a task are"
                        + " identical, so eval/pass@" + ec.k() + " equals eval/pass@1 and the evaluation costs " + ec.samplesPerTask()
                        + " times one sample's; set eval.samples and eval.k to 1, or a temperature > 0");
            }
        }
        this.tasks = new TaskStream(workload.train(), cfg.run().seed(), dataPos);
        // the device the models are on (Policies.device: CUDA only where LibTorch sees a device, so that
        // torch_cuda, absent from the CPU build, is reached on a CUDA run alone); one device per rank
        CudaPeakMemory.Opened gpu = CudaPeakMemory.of(
                policies.byId.values().stream().findFirst().map(p -> p.model().device()).orElse(null));
        this.gpuMemory = gpu.meter();
        if (gpu.reason() != null && dist.isMaster()) log.println("drmas: warning: " + gpu.reason());
    }

    /** "resumed CHECKPOINT at step N" once a resume has been accepted; else where the models come from (once). */
    private void announceStart() {
        if (announced) return;
        announced = true;
        if (checkpoint != null) {
            log.println("drmas: resumed " + checkpoint + " at step " + step);
        } else if (!policies.origin.isEmpty()) {
            log.println("drmas: models: " + policies.origin);
        }
    }

    /** The [step, data position] a run starts from: {@code checkpoint}'s, or zeros without one. */
    private static long[] startOf(Path checkpoint) {
        if (checkpoint == null) return new long[2];
        var st = Checkpoints.state(checkpoint);
        return new long[] {st.path("step").asLong(), st.path("data_position").asLong()};
    }

    /** A trainer for {@code cfg}: resumes its latest checkpoint when run.resume says so. */
    public static Trainer open(RunConfig cfg, PrintStream log) {
        return open(cfg, log, Collective.single());
    }

    /**
     * As {@link #open(RunConfig, PrintStream)}, as one rank of {@code dist} (which the caller
     * closes after the trainer). Every rank reads the same checkpoint, whatever the world size it
     * was written with: the trainer state (step, data position) is global.
     */
    public static Trainer open(RunConfig cfg, PrintStream log, Collective dist) {
        return open(cfg, log, dist, () -> { });
    }

    /**
     * As {@link #open(RunConfig, PrintStream, Collective)}, running {@code openedHook} once this
     * rank's models are open, before the ready point that the ranks pass together: tests in this
     * package make one rank fail there; nothing else passes one.
     */
    static Trainer open(RunConfig cfg, PrintStream log, Collective dist, Runnable openedHook) {
        try {
            Path cp = null;
            if (cfg.run().resumeAuto()) {
                cp = new Checkpoints(cfg.run().runDir().resolve("checkpoints")).latest().orElse(null);
            } else if (!cfg.run().resumeNever()) {
                cp = cfg.run().resumeFrom();
                if (cp.getFileName() != null && cp.getFileName().toString().endsWith(".tmp")) {
                    // a save that did not complete (its folder not renamed yet), which the next start of its run removes
                    throw new IllegalArgumentException("run.resume: " + cp + " is an unfinished checkpoint (a save that did not"
                            + " complete; its run's next start removes it): resume from a finished one, step_NNNNNN without .tmp,"
                            + " or run.resume: auto");
                }
                if (!Files.isRegularFile(cp.resolve(Checkpoints.STATE_FILE))) {
                    // "AUTO" or "Never" is read as a path (a folder may have any name): the keywords are lower case
                    String v = cp.toString();
                    String keyword = !Files.exists(cp) && (v.equalsIgnoreCase("auto") || v.equalsIgnoreCase("never"))
                            ? "; the keywords are lower case (auto, never): " + v.toLowerCase(java.util.Locale.ROOT) + "?" : "";
                    throw new IllegalArgumentException("run.resume: " + cp + " is not a checkpoint (no " + Checkpoints.STATE_FILE + ")"
                            + keyword);
                }
                refuseBranching(cfg, cp);
            }
            try {
                return new Trainer(cfg, log, cp, dist, openedHook);
            } catch (RuntimeException e) {
                if (cp != null && cfg.run().resumeAuto() && dist.isMaster()) hintAtDamagedCheckpoint(cfg, cp, e, log);
                throw e;
            }
        } catch (RuntimeException | Error e) {
            // what one rank alone met (a file only it sees, rank 0's setup of the run folder, an out-of-memory, a fault
            // reading a mapped checkpoint file inside a sharded resume's spreading): the others, at their next ready
            // point or in the collective they wait in, stop with it (a failure another rank announced is not announced again)
            dist.announceFailure("opening the trainer", e);
            throw e;
        }
    }

    /**
     * A checkpoint that cannot be read (a file truncated by a full disk or a copy, a bit flip) stops
     * the run naming the file; the way on, to the checkpoint before it, is said here, as resuming
     * that one by path is refused while the damaged one is there (refuseBranching).
     */
    private static void hintAtDamagedCheckpoint(RunConfig cfg, Path cp, RuntimeException e, PrintStream log) {
        // a file of the checkpoint itself, not the ranks' disagreement about which one (whose message names it too)
        if (e instanceof ConfigException || e instanceof dev.drmas.dist.DistributedException || e.getMessage() == null
                || !e.getMessage().contains(cp.toString())) return;
        Checkpoints cps = new Checkpoints(cfg.run().runDir().resolve("checkpoints"));
        long at = Checkpoints.stepOf(cp);
        Path before = null;
        for (Path p : cps.complete()) if (Checkpoints.stepOf(p) < at) before = p;
        if (before == null) return;
        log.println("drmas: the checkpoint " + cp + " cannot be read; to resume the one before it (" + before.getFileName()
                + "), move " + cp.getFileName() + " out of " + cps.root() + " and run the same command again");
    }

    /**
     * run.resume naming a checkpoint while this run's folder holds newer ones: training from it would
     * save among them (and trainer.keep_last, keeping the newest by step, would delete its own saves),
     * and a later resume (auto) would pick the newest, of the other line, mixing the two in weights
     * and metrics; a job requeued with the path would go back to it each time. Refused, naming the
     * newer ones: one of the run's own older checkpoints, or another run's checkpoint of a lower step.
     */
    private static void refuseBranching(RunConfig cfg, Path cp) {
        Path own = cfg.run().runDir().resolve("checkpoints");
        if (!Files.isDirectory(own)) return;
        Path abs = cp.toAbsolutePath().normalize();
        long at = Checkpoints.stepOf(abs);
        List<String> newer = new Checkpoints(own).complete().stream().filter(p -> Checkpoints.stepOf(p) > at)
                .map(p -> p.getFileName().toString()).toList();
        if (newer.isEmpty()) return;
        if (inFolder(abs, own)) {
            throw ConfigException.at("run.resume", cp + " is older than this run's newer checkpoints (" + String.join(", ", newer)
                    + " in " + own + "): training on from it would save among them, and the next resume would take the newest, "
                    + "mixing the two runs. To go back to it, move the newer ones out of " + own + " first; or start another run "
                    + "from it (another run.name, run.resume: this path); or resume the newest (run.resume: auto)");
        }
        throw ConfigException.at("run.resume", cp + " (step " + at + ") would train into " + own + ", which holds newer checkpoints ("
                + String.join(", ", newer) + ") of another run: the next resume would take the newest, mixing the two. Start the "
                + "run from it under another run.name, or move those checkpoints out of " + own);
    }

    /**
     * Training shards each step's tasks over the ranks, so it needs at least one a rank; an evaluation
     * shards the test tasks instead, and runs with any rollout.tasks_per_step.
     *
     * @throws IllegalArgumentException naming both numbers
     */
    public static void requireTaskPerRank(RunConfig cfg, int worldSize) {
        if (cfg.rollout().tasksPerStep() < worldSize) {
            throw new IllegalArgumentException("rollout.tasks_per_step (" + cfg.rollout().tasksPerStep() + ") is smaller than "
                    + "WORLD_SIZE (" + worldSize + "): every rank needs at least one task per training step");
        }
    }

    /** The collective of this process: c10d when {@code env} names several ranks, else the no-op one. */
    public static Collective connect(RunConfig cfg, DistEnv env) {
        if (!env.distributed()) return Collective.single();
        return new ProcessGroup(env, cfg.distributed(), Policies.device(cfg).is_cuda());
    }

    public long step() {
        return step;
    }

    public Path runDir() {
        return runDir;
    }

    /** The checkpoint this run resumed from, or null (it started from its models). */
    public Path checkpoint() {
        return checkpoint;
    }

    /**
     * What decides an evaluation's results besides the tasks and the ranks: the settings that reach
     * generation and grading (models, agents, orchestra, data, rollout, eval, the seed and the device;
     * not distributed, metrics, trainer, ppo, sft or threads), the step, and the weights themselves
     * (each model's fp64 sum and sum of squares), which a warm start done since, or a checkpoint
     * written again at the same step, changes while the config does not.
     */
    String evaluationIdentity() {
        return String.join("\n", "models " + cfg.models(), "agents " + cfg.agents(), "orchestra " + cfg.orchestra(), "data " + cfg.data(),
                "rollout " + cfg.rollout(), "eval " + cfg.eval(), "seed " + cfg.run().seed(), "device " + cfg.run().device(), "step " + step,
                "weights " + java.util.Arrays.toString(policies.checksums()));
    }

    /** The last step's rows and advantages, for tests in this package. */
    record LastStep(RolloutBatch batch, Advantages.Result adv) {
    }

    LastStep lastStep;

    /** GenerationBudget.check of {@code ps} with {@code testTasks} evaluated, this rank's world and host. */
    private void checkGenerationBudget(Policies ps, int testTasks) {
        GenerationBudget.check(cfg, ps, testTasks, dist.worldSize(), GenerationBudget.ranksOnThisHost(System.getenv(), dist.worldSize()));
    }

    /** How many held-out tasks {@link #evaluate()} has (0: it evaluates nothing). */
    public int testTaskCount() {
        return workload.test().size();
    }

    /** The models that start from a random initialisation (no checkpoint, no path, no warm start). */
    public Set<String> randomModels() {
        return Set.copyOf(policies.randomInit);
    }

    /** The run's models by id (the live ones: benchmarks switch their decoding arrangement). */
    public Map<String, dev.drmas.model.CausalLm> models() {
        Map<String, dev.drmas.model.CausalLm> m = new java.util.LinkedHashMap<>();
        for (Policies.Policy p : policies.byId.values()) m.put(p.id(), p.model());
        return m;
    }

    /** The run's models, for tests in this package. */
    Map<String, Policies.Policy> policiesForTest() {
        return policies.byId;
    }

    // ------------------------------------------------------------------ the loop

    /** The steps train() trains to: trainer.steps, or trainer.epochs' count over the training tasks. */
    private int trainSteps() {
        return cfg.trainer().totalSteps(tasks.size(), cfg.rollout().tasksPerStep());
    }

    /** Trains to trainer.steps (or trainer.epochs) with logging, evaluation and checkpoints; returns the last eval. */
    public Map<String, Double> train() throws IOException {
        var tc = cfg.trainer();
        boolean resumed = checkpoint != null;
        var mc = cfg.metrics();
        boolean m0 = dist.isMaster();  // the other ranks' metrics are merged into rank 0's
        MetricsLogger metrics;
        int trainSteps;
        try {
            requireTaskPerRank(cfg, dist.worldSize());
            trainSteps = trainSteps();
            if (tc.epochs() > 0 && m0) {
                log.printf(java.util.Locale.ROOT, "drmas: trainer.epochs %d: %d steps (%d x floor(%d training tasks / %d a step)); "
                        + "trainer.steps is not used%n", tc.epochs(), trainSteps, tc.epochs(), tasks.size(), cfg.rollout().tasksPerStep());
            }
            ResumeCheck.refuse(checkpoint, trainingChanges);
            policies.requireReferences();
            announceStart();
            String cold = policies.byId.keySet().stream().filter(m -> !policies.warmStarted.contains(m)).findFirst().orElse(null);
            if (!resumed && cfg.run().warmStart() != null && cold != null) {
                // a warm start asked for by name and not there (a typo, a job not yet run) must not become a random init,
                // nor the path's weights
                throw ConfigException.at("run.warm_start", cfg.run().warmStart() + " has no weights for model '" + cold + "' (no "
                        + cfg.run().warmStart().resolve(cold).resolve("config.json") + "); run `drmas sft` for it first, or fix the path");
            }
            if (!resumed && cfg.run().resumeNever()) refuseEarlierRun();
            if (dist.isMaster()) {
                // an agent the workflow's options leave without a turn (math, max_loops 1: the verifier) trains on nothing
                for (String w : dev.drmas.config.IdleAgents.warnings(cfg)) log.println("drmas: warning: " + w);
                if (tc.saveFreq() > 0) checkpoints.checkWritable();  // now, not at the first save
                // what a save killed midway left (tens of GB on a large model), which nothing else would remove
                for (Path p : checkpoints.removeUnfinished()) log.println("drmas: removed " + p + " (a checkpoint whose save or deletion was interrupted)");
                if (resumed && step >= trainSteps) {
                    String key = tc.epochs() > 0 ? "trainer.epochs" : "trainer.steps";
                    log.println("drmas: nothing to train: the checkpoint is at step " + step + " and " + key + " is "
                            + (tc.epochs() > 0 ? tc.epochs() + " (" + trainSteps + " steps)" : trainSteps) + " (raise " + key + " to train on)");
                }
                cfg.save(runDir.resolve("config.yaml"));
                writePlan();
            }
            // on the console: the bar (one line, kept short), or without it a line per logged step into the log, with each
            // model's loss too, as a trainer's log has it
            List<String> shown = new java.util.ArrayList<>(List.of("reward/mean"));
            if (!mc.progressBar()) for (String id : policies.byId.keySet()) shown.add("model/" + id + "/pg_loss");
            shown.add("eval/pass@1");
            metrics = MetricsLogger.forRun(runDir, trainSteps, resumed ? step : -1, shown,
                    m0 && mc.jsonl(), m0 && mc.tensorboard(), m0 && mc.progressBar(), m0 ? log : null);
        } catch (RuntimeException | IOException | Error e) {
            // what one rank alone refused (rank 0's checks of the run folder, a run folder one rank sees otherwise)
            // stops the others at the ready point below, with its reason, before the step's collectives
            dist.announceFailure("starting to train", e);
            throw e;
        }
        Map<String, Double> lastEval = Map.of();
        // the stop request is closed after the metrics (a second signal halts at once until then)
        try (StopRequest stopRequest = new StopRequest(m0 ? log : null, () -> step, tc.saveFreq() > 0); MetricsLogger mm = metrics;
             RunStopScope scope = new RunStopScope(stopRequest)) {
            this.stop = stopRequest;
            dist.awaitReady("every rank's start of training");
            String doing = "evaluating before training";
            try {
                if (step == 0 && tc.evalBeforeTrain() && tc.evalFreq() > 0) metrics.log(0, lastEval = evaluate());
                // the checkpoint's own evaluation, due after its save and never done (it failed, or the run was killed)
                doing = "evaluating at step " + step;
                // (not with trainer.eval_freq 0: the way past an evaluation that keeps failing, and evaluation off)
                if (evaluationPending()) {
                    if (tc.evalFreq() == 0) {
                        if (dist.isMaster()) {
                            log.println("drmas: the evaluation of step " + step + ", due when its checkpoint was saved, was never"
                                    + " done; trainer.eval_freq is 0: not run (a resume from this checkpoint with evaluation on runs it)");
                        }
                    } else {
                        // its line may be in metrics.jsonl already: the run ended after logging it, before marking it
                        Map<String, Double> logged = evaluationLogged();
                        if (logged == null) metrics.log(step, lastEval = evaluate());
                        else lastEval = logged;
                        if (ownCheckpoint(checkpoint)) markEvaluated(checkpoint, lastEval);
                    }
                }
                while (step < trainSteps) {
                    doing = "training step " + (step + 1);
                    Map<String, Double> m;
                    RunStop.inStep(true);  // a tool that cannot go on may ask for a stop after this step (RunStop)
                    try {
                        m = trainStep();
                    } finally {
                        RunStop.inStep(false);
                    }
                    step++;
                    if (due(tc.logFreq())) metrics.log(step, m);
                    // before evaluating or saving weights that are not finite, or not the same on every rank
                    doing = "checking the weights at step " + step;
                    if (dist.worldSize() > 1 && due(cfg.distributed().checksumFreq())) checkSameWeights();
                    // the checkpoint before the evaluation: an evaluation that fails (an out-of-memory in its larger
                    // batch, a reward function's or retriever's exception) must not cost the steps since the last one
                    boolean saved = due(tc.saveFreq());
                    if (saved) {
                        doing = "saving the checkpoint of step " + step;
                        metrics.sync();  // the lines up to this step on the disk before the checkpoint that a resume keeps them for
                        save();
                    }
                    doing = "evaluating at step " + step;
                    if (due(tc.evalFreq())) {
                        metrics.log(step, lastEval = evaluate());
                        if (saved) markEvaluated(checkpoints.dir(step), lastEval);
                    }
                    // a stop asked for during the step, its save or its evaluation ends the run here, the step whole (its
                    // due evaluation included, which a resume would not redo) and saved
                    doing = "agreeing whether to stop after step " + step;
                    if (stopRequest.agreed(dist, step)) {
                        if (!saved && tc.saveFreq() > 0) {
                            doing = "saving the checkpoint of step " + step + " to stop";
                            metrics.sync();
                            save();
                            // its evaluation ran before this save: a resume must not run it again
                            if (due(tc.evalFreq())) markEvaluated(checkpoints.dir(step), lastEval);
                        }
                        String why = stopReason(stopRequest);
                        if (m0) {
                            log.println("drmas: stopped after step " + step + (why != null ? ": " + why : " as requested") + "; "
                                    + (tc.saveFreq() > 0 ? "checkpoint " + checkpoints.dir(step) + ": the same command resumes it"
                                    : "no checkpoint (trainer.save_freq is 0)"));
                        } else if (stopRequest.reason() != null) {
                            log.println("drmas: stopped after step " + step + ": " + why);
                        }
                        break;
                    }
                }
            } catch (RuntimeException | IOException | Error e) {
                // what one rank alone met mid-training (a reward function's exception, an out-of-memory, rank 0's failed
                // checkpoint write) while its process lives on: the others, waiting in a collective this rank will not
                // join, stop within moments naming it and why, instead of at distributed.timeout_s ("did not arrive").
                // A failure of a collective itself, or one another rank announced, is not announced again
                dist.announceFailure(doing, e);
                throw e;
            }
        }
        return lastEval;
    }

    /**
     * run.resume: never starts afresh; in a folder that already holds a run it would truncate that
     * run's metrics and leave its later checkpoints among the new ones, where a later auto-resume
     * picks them up. (`drmas sft` opens its trainer with never too: it writes sft/ only, never here.)
     */
    private void refuseEarlierRun() {
        Path metrics = runDir.resolve("metrics.jsonl");
        var cp = checkpoints.latest();
        boolean logged;
        try {
            logged = Files.isRegularFile(metrics) && Files.size(metrics) > 0;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + metrics, e);
        }
        if (cp.isEmpty() && !logged) return;
        throw dev.drmas.config.ConfigException.at("run.resume", "is never, but the run folder " + runDir + " already holds a run ("
                + (cp.isPresent() ? cp.get() : metrics) + "): starting afresh there would overwrite its metrics and mix its "
                + "checkpoints with the new ones. Give the new run another run.name, delete the folder, or continue it "
                + "(run.resume: auto)");
    }

    /** Whether a task every {@code freq} steps (0: never) is due now; the last step always is. */
    private boolean due(int freq) {
        return freq > 0 && (step % freq == 0 || step == trainSteps());
    }

    /**
     * Runs first in each {@link #trainStep}: tests in this package make one rank fail there (its
     * process living on) to check that the other ranks stop promptly; nothing else sets it.
     */
    Runnable stepHook = () -> { };

    /** One training step; returns its metrics. */
    public Map<String, Double> trainStep() {
        stepHook.run();
        var rc = cfg.rollout();
        PhaseTimer timer = new PhaseTimer();
        double collective0 = dist.collectiveSeconds();
        Shard mine = Shard.of(rc.tasksPerStep(), dist);  // this rank's groups: uids and trajectories are rank-local
        List<Task> batchTasks = tasks.next(rc.tasksPerStep()).subList(mine.first(), mine.first() + mine.count());
        EnginePolicy policy = new EnginePolicy(policies, rc.sampling(), rc.maxPromptTokens(), rc.truncation(), rc.maxNewTokens(),
                SamplingStreams.training(step), cfg.run().seed(), t -> (long) mine.first() * rc.rolloutsPerTask() + t);
        Map<String, Double> memory = new LinkedHashMap<>();
        List<Episode> episodes;
        try {
            episodes = timed(timer, memory, gpuMemory, "rollout", () -> RolloutBatch.run(workload.orchestra(), batchTasks, rc.rolloutsPerTask(), policy));
        } finally {
            policies.clearPrefixes();  // the prompts kept for the phase's later turns: stale after the update anyway
        }
        RolloutBatch batch = timed(timer, memory, gpuMemory, "reward", () -> RolloutBatch.of(batchTasks, episodes, rc.rolloutsPerTask(), workload));
        Advantages.Result adv = timed(timer, memory, gpuMemory, "advantage", () -> batch.advantages(cfg.normConfig(), workload.team().size()));
        PpoUpdater.Stats[] stats = timed(timer, memory, gpuMemory, "update", () -> update(batch, adv.advantages()));
        lastStep = new LastStep(batch, adv);
        Map<String, Double> m = StepMetrics.of(new StepMetrics.Step(step + 1, batch, adv, stats, policy.truncated(), policy.prefill(),
                timer, collective0), workload.team(), workload, policies, dist);
        m.putAll(memory);
        // what the process holds after the step: over a long run, a leak shows as a heap that grows
        // and the allocator's settling as a resident size that grows while the heap does not
        long resident = PeakMemory.residentBytes(), heap = PeakMemory.heapBytes();
        if (resident >= 0) m.put("memory/resident_bytes", (double) resident);
        if (heap >= 0) m.put("memory/heap_live_bytes", (double) heap);
        return m;
    }

    /** The PPO update of every model from its agents' rows, in model order. */
    private PpoUpdater.Stats[] update(RolloutBatch batch, float[] advantages) {
        PpoUpdater.Stats[] stats = new PpoUpdater.Stats[policies.byId.size()];
        int mi = 0;
        for (Policies.Policy p : policies.byId.values()) {
            PpoUpdater.Settings settings = ppoSettings(cfg, p.gradClip());
            stats[mi++] = new PpoUpdater(p.model(), p.optim(), p.reference(), settings, dist, p.id()).vocabLimit(p.vocabLimit())
                    .update(batch.rowsOf(p.id(), workload.team(), advantages), cfg.run().seed() * 1_000_003L + step * 131 + mi);
        }
        return stats;
    }

    /** The update settings of a model whose optimiser clips at {@code gradClip}, from the run's config. */
    static PpoUpdater.Settings ppoSettings(RunConfig cfg, double gradClip) {
        var pc = cfg.ppo();
        return new PpoUpdater.Settings(pc.epochs(), pc.miniBatchSize(), pc.microBatchSize(), cfg.rollout().temperature(),
                pc.entropyCoef(), gradClip, cfg.lossConfig(), cfg.rollout().maxNewTokens(), cfg.trainer().gradNormPerAgent(),
                pc.shuffle(), pc.maxTokensPerMicroBatch(), pc.fusedLmHead(), pc.updatesPerStep());
    }

    /**
     * Runs one phase of the step, timed, and puts {@code memory/peak_<phase>_bytes} into {@code
     * memory}: what the phase added at its peak to this process's resident memory (PeakMemory;
     * host memory, this rank's own; absent where it cannot be read). The first step's update also
     * allocates the gradients, which stay; from the second step on it is the phase's transient
     * memory, what `drmas plan` predicts. On a CUDA run ({@code gpu} not null) also {@code
     * memory/gpu_peak_<phase>_allocated_bytes} and {@code _reserved_bytes}: the caching allocator's
     * peaks on this rank's device over the phase (CudaPeakMemory; totals, what is resident included,
     * as torch.cuda.max_memory_allocated after reset_peak_memory_stats); absent on the CPU.
     */
    private static <T> T timed(PhaseTimer timer, Map<String, Double> memory, CudaPeakMemory gpu, String phase,
                               java.util.function.Supplier<T> work) {
        PeakMemory mem = PeakMemory.start();
        if (gpu != null) gpu.start();
        T out;
        try (var t = timer.phase(phase)) {
            out = work.get();
        }
        long added = mem.addedBytes();
        if (added >= 0) memory.put("memory/peak_" + phase + "_bytes", (double) added);
        if (gpu != null) {
            CudaPeakMemory.Peaks p = gpu.peaks();
            memory.put("memory/gpu_peak_" + phase + "_allocated_bytes", (double) p.allocatedBytes());
            memory.put("memory/gpu_peak_" + phase + "_reserved_bytes", (double) p.reservedBytes());
        }
        return out;
    }

    // ------------------------------------------------------------------ checkpoints, evaluation, warm start

    /** The file in the run folder that says how many steps train() trains to (drmas report reads it). */
    public static final String PLAN_FILE = "plan.json";

    /**
     * runDir/plan.json: the steps this run trains to, and what they come from. With trainer.epochs they are
     * epochs × ⌊training tasks / tasks_per_step⌋, and the task count is in no other file of the run folder
     * (config.yaml keeps trainer.steps, unused then, and the resume checks read it). Written whole or not at
     * all; a failure is a warning: the report then says the planned steps are unknown.
     */
    private void writePlan() {
        Path f = runDir.resolve(PLAN_FILE), tmp = runDir.resolve(PLAN_FILE + ".tmp");
        try {
            var plan = new java.util.LinkedHashMap<String, Object>();
            plan.put("total_steps", trainSteps());
            plan.put("epochs", cfg.trainer().epochs());
            plan.put("train_tasks", tasks.size());
            plan.put("tasks_per_step", cfg.rollout().tasksPerStep());
            Files.writeString(tmp, new ObjectMapper().writeValueAsString(plan) + "\n");
            Durable.syncFile(tmp);
            Files.move(tmp, f, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException | RuntimeException e) {
            log.println("drmas: warning: cannot write " + f + " (" + e.getMessage() + "): drmas report will not know this run's planned steps");
        }
    }

    /** The file in a checkpoint folder that says its step's evaluation was done, with its results. */
    static final String EVALUATED_FILE = "evaluated.json";

    /**
     * Whether the resumed checkpoint's own step was due for an evaluation (it runs after the save)
     * that never finished: a failed one (an out-of-memory in its larger batch), or a run killed
     * meanwhile. Every rank learns alike (rank 0 writes the file, which the others may see late).
     */
    private boolean evaluationPending() {
        boolean mine = checkpoint != null && Checkpoints.state(checkpoint).path("evaluation_due").asBoolean(false)
                && !Files.isRegularFile(checkpoint.resolve(EVALUATED_FILE));
        return dist.any(mine, "whether the evaluation of step " + step + " is pending");
    }

    /**
     * The evaluation of the resumed step as metrics.jsonl holds it (rank 0 reads; the other ranks get
     * an empty map), when the run that saved the step logged it and ended before marking the
     * checkpoint evaluated (killed, or evaluated.json not written): evaluating it again would log the
     * step's evaluation twice. Null when it was not logged, or metrics.jsonl is off.
     */
    private Map<String, Double> evaluationLogged() throws IOException {
        Map<String, Double> mine = dist.isMaster() && cfg.metrics().jsonl()
                ? JsonlSink.loggedAt(runDir.resolve(JsonlSink.FILE_NAME), step, "eval/") : Map.of();
        boolean logged = dist.any(!mine.isEmpty(), "whether the evaluation of step " + step + " was logged before the run ended");
        if (!logged) return null;
        if (dist.isMaster()) {
            log.println("drmas: the evaluation of step " + step + " is in " + runDir.resolve(JsonlSink.FILE_NAME)
                    + " already (the run ended before recording it in its checkpoint): not run again");
        }
        return mine;
    }

    /** Whether {@code cp} is one of this run's checkpoints (run.resume may name another run's, which is not this run's to mark). */
    private boolean ownCheckpoint(Path cp) {
        return inFolder(cp, runDir.resolve("checkpoints"));
    }

    /** Whether {@code p}'s parent is the folder {@code dir} (the same file; false when either cannot be read). */
    private static boolean inFolder(Path p, Path dir) {
        Path parent = p.toAbsolutePath().normalize().getParent();
        try {
            return parent != null && Files.isSameFile(parent, dir);
        } catch (IOException e) {
            return false;
        }
    }

    /** Rank 0 marks {@code dir}'s step evaluated (not durable: at worst a resume evaluates it again). */
    private void markEvaluated(Path dir, Map<String, Double> results) {
        if (!dist.isMaster()) return;
        try {
            Files.writeString(dir.resolve(EVALUATED_FILE), new ObjectMapper().writeValueAsString(results));
        } catch (IOException e) {
            log.println("drmas: warning: cannot write " + dir.resolve(EVALUATED_FILE) + " (" + e.getMessage() + "): a resume from "
                    + dir.getFileName() + " takes its evaluation from " + JsonlSink.FILE_NAME + ", or runs it again where that is off");
        }
    }

    /** Writes a checkpoint of the current step (rank 0 writes, the others wait for it). */
    public Path save() throws IOException {
        try (PointerScope scope = new PointerScope()) {
            // every rank: a sharded optimiser's state is gathered by a collective, which rank 0
            // writes into the checkpoint window by window as it arrives
            if (dist.isMaster()) write(policies.optimizers());
            else Checkpoints.takePart(policies.optimizers());
        }
        dist.barrier("the checkpoint of step " + step);
        if (dist.isMaster() && cfg.trainer().keepLast() > 0) {
            // once every rank is past the save: the old ones are no longer anyone's latest. Failing to delete one costs
            // disk space, not the run: a warning, and training goes on
            try {
                checkpoints.prune(cfg.trainer().keepLast(), step);
            } catch (IOException | RuntimeException e) {
                log.println("drmas: warning: " + e.getMessage());
            }
        }
        return checkpoints.dir(step);
    }


    /** Rank 0's part of {@link #save}: the checkpoint folder. */
    private void write(Map<String, ModelOptimizer> optims) throws IOException {
        policies.saveReferences(runDir);  // before the checkpoint that a resume would need it with
        ObjectNode st = new ObjectMapper().createObjectNode();
        st.put("data_position", tasks.position());
        st.put("seed", cfg.run().seed());
        st.put("world_size", dist.worldSize());  // informative: resume works with any world size
        // the step's evaluation runs after this save; the evaluation file marks it done (evaluationPending)
        st.put("evaluation_due", due(cfg.trainer().evalFreq()));
        // the tokenizer and the config go in before the rename: a checkpoint with a name is complete
        checkpoints.write(step, policies.models(), optims, st, tmp -> {
            policies.copyTokenizers(tmp.resolve("models"));
            Files.writeString(tmp.resolve(ResumeCheck.CONFIG_FILE), cfg.toYaml());
        });
    }

    /**
     * Stops the run when the ranks no longer hold the same weights (sum and sum of squares per
     * model), or when a model's weights are not finite on some rank: a NaN checksum never equals
     * itself, so those used to read as ranks that diverged, even when every rank held the same NaN.
     */
    void checkSameWeights() {
        String what = "the parameter checksum of models " + policies.byId.keySet() + " at step " + step;
        double[][] all = dist.gather(policies.checksums(), what);  // every rank sees every rank's, and stops alike
        List<String> bad = new java.util.ArrayList<>();
        int m = 0;
        for (String id : policies.byId.keySet()) {
            List<String> ranks = new java.util.ArrayList<>();
            int first = -1;
            for (int r = 0; r < all.length; r++) {
                if (Double.isFinite(all[r][2 * m]) && Double.isFinite(all[r][2 * m + 1])) continue;
                ranks.add(Integer.toString(r));
                if (first < 0) first = r;
            }
            if (first >= 0) {
                bad.add("model '" + id + "' on rank" + (ranks.size() > 1 ? "s " : " ") + String.join(", ", ranks) + " (parameter sum "
                        + all[first][2 * m] + ", sum of squares " + all[first][2 * m + 1] + ")");
            }
            m++;
        }
        if (!bad.isEmpty()) {
            throw new dev.drmas.dist.DistributedException("the weights of " + String.join("; ", bad) + " are not finite (NaN or "
                    + "infinite) at step " + step + "; training cannot go on from them. Resume from a checkpoint before this step"
                    + " (a lower optim.lr, or float32 weights, may keep them finite)");
        }
        // identical inputs and ops give identical bits; the slack only allows for nodes whose
        // libraries sum in a different order
        Collective.requireSame(all, 1e-9, what, Collective.SAME_WEIGHTS);
    }

    private volatile StopRequest stop;  // while train() runs

    /** The exit status of a run that a tool stopped after saving its step (RunStop: a service gone): EX_TEMPFAIL. */
    public static final int TOOL_STOP_STATUS = StopRequest.TOOL_STOP;

    /**
     * Why the run stopped, for its last line: this rank's tool's reason, or the rank whose tool asked
     * (its own output says why: the ranks share numbers, not text); null for a signal or a test's request.
     */
    private String stopReason(StopRequest s) {
        if (s.reason() != null) return s.reason();
        int from = s.agreedFrom();
        if (s.exitStatus() == StopRequest.TOOL_STOP && from >= 0 && from != dist.rank()) {
            return "a tool of rank " + from + " could not go on (rank " + from + "'s output says why)";
        }
        return null;
    }

    /** The training loop's stop request in RunStop while the loop runs (closed with it). */
    private static final class RunStopScope implements AutoCloseable {
        RunStopScope(StopRequest s) {
            RunStop.open(new RunStop.Control() {
                @Override
                public boolean stopRequested() {
                    return s.requested();
                }

                @Override
                public void requestStop(String why) {
                    s.request(why);
                }
            });
        }

        @Override
        public void close() {
            RunStop.close();
        }
    }

    /** Asks train() to stop after the step under way, as SIGTERM does (tests in this package). */
    void requestStop() {
        StopRequest s = stop;
        if (s == null) throw new IllegalStateException("not training");
        s.request();
    }

    /**
     * Asks train() to stop after the step under way as a tool of this rank does through RunStop (tests in
     * this package: RunStop is one per process, and their ranks are threads of one).
     */
    void requestToolStop(String why) {
        StopRequest s = stop;
        if (s == null) throw new IllegalStateException("not training");
        s.request(why);
    }

    /**
     * 128 + the number of the signal that stopped the last train() (143 for SIGTERM), 75 (EX_TEMPFAIL) when a tool
     * asked it to stop (RunStop: a retrieval server gone), 0 when none did: the command's exit status. On several
     * ranks every rank returns the status they agreed on when they stopped, whichever rank was asked.
     */
    public int stopStatus() {
        StopRequest s = stop;
        return s == null ? 0 : s.exitStatus();
    }

    /** Runs first in each {@link #evaluate}: tests in this package make an evaluation fail there; nothing else sets it. */
    Runnable evalHook = () -> { };

    /** avg@n and pass@k on the held-out tasks with the eval sampling settings. */
    public Map<String, Double> evaluate() {
        return evaluateTasks(null).metrics();
    }

    /** Runs after each chunk of an evaluation: tests in this package stop one there; nothing else sets it. */
    Runnable evalChunkHook = () -> { };

    /**
     * {@link #evaluate}'s metrics with each held-out task's result. With {@code evalDir}, rank 0 keeps
     * each chunk's results in evalDir/step_N.&lt;fingerprint&gt;.partial.jsonl as it ends, and an
     * evaluation of this step stopped part-way continues from there when it is the same evaluation
     * ({@link #evaluationIdentity}, the ranks, the chunk size and the tasks); the caller removes the
     * file (Evaluation.kept) once it has written the results.
     */
    public Evaluation evaluateTasks(Path evalDir) {
        announceStart();
        try {
            if (!evalBudgetChecked) {
                checkGenerationBudget(policies, workload.test().size());
                evalBudgetChecked = true;
            }
            evalHook.run();
            Evaluator e = new Evaluator(cfg, workload, policies, dist, log);
            e.afterChunk = evalChunkHook;
            return evalDir == null ? e.evaluateTasks(null, null) : e.evaluateTasks(evalDir.resolve("step_" + step), this::evaluationIdentity);
        } catch (RuntimeException | Error e) {
            // a rank that fails evaluating alone (`drmas eval` too) stops the others waiting in its collectives
            dist.announceFailure("evaluating at step " + step, e);
            throw e;
        }
    }

    /** The supervised warm start; saves the weights to runDir/sft/models, where training starts from. */
    public Map<String, Double> sft() throws IOException {
        if (cfg.run().warmStart() == null && !policies.warmStarted.isEmpty()) {
            // the models opened from this run's own sft/models: a second warm start would train those weights again on
            // the same demonstrations (same seed, same tasks), compounding silently
            throw new IllegalArgumentException("run folder " + runDir + " has a warm start already (" + WarmStart.weights(runDir)
                    + ", model(s) " + String.join(", ", policies.warmStarted) + "): drmas sft would train it again on the same"
                    + " demonstrations. To start it over, delete " + runDir.resolve("sft") + " (or give another run.name); to train"
                    + " on from it, run drmas train");
        }
        announceStart();
        Map<String, Double> out = new WarmStart(cfg, workload, policies, tasks, log).run(runDir);
        policies.restartReferences();  // should this trainer go on to train, RL starts from the warm start
        return out;
    }

    @Override
    public void close() {
        try {
            policies.close();
        } finally {
            workload.close();
        }
    }
}
