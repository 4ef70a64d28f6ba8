// EvalCommand.java — `drmas eval CONFIG [key=value ...]`: avg@n and pass@k of the run's latest
// checkpoint (or its starting models) on the held-out tasks, with the eval sampling settings. As one
// rank of a data-parallel evaluation when the torchrun variables (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT) say so, as `drmas train` (`drmas launch --eval` starts such ranks): the paper's
// avg@16 over a whole test set is 16 rollouts a task, too many for one GPU. Rank 0 prints the metrics
// and writes them, with each task's counts, to the run folder's eval/step_N.json and .tasks.jsonl; an
// evaluation stopped part-way continues from its last whole chunk (eval/step_N.*.partial.jsonl) when run again.
package dev.drmas.cli;

import dev.drmas.dist.Collective;
import dev.drmas.train.RunLock;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

@Command(name = "eval", mixinStandardHelpOptions = true,
        description = {"Evaluate the run's latest checkpoint (or its starting models: a path or the warm start) on the held-out tasks:",
                "avg@n, pass@k. A run with nothing trained to start from is refused unless --allow-random.",
                "As one rank of several when RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are set (`drmas launch --eval`)."})
final class EvalCommand extends RunCommand {
    @Option(names = "--allow-random", description = "evaluate models that have no weights yet (random initialisation) instead of refusing")
    boolean allowRandom;

    /**
     * A run folder locked by its training: `drmas eval` evaluates one of its checkpoints meanwhile
     * under another run.name with run.resume (another name alone would evaluate the starting models).
     */
    static UserError whileTraining(dev.drmas.config.RunConfig cfg, UserError e) {
        if (!(e.getCause() instanceof RunLock.RunFolderException f) || !f.inUse()) {
            return e;
        }
        java.nio.file.Path checkpoints = cfg.run().runDir().resolve("checkpoints");
        String cp = checkpoints.resolve("step_N").toString();
        try {
            cp = new dev.drmas.train.Checkpoints(checkpoints).latest().map(java.nio.file.Path::toString).orElse(cp);
        } catch (RuntimeException unreadable) {
            // the hint's general form
        }
        return new UserError(e.getMessage() + ". To evaluate one of its checkpoints while it trains: drmas eval with another"
                + " run.name and run.resume=" + cp, e);
    }

    @Override
    public Integer call() throws Exception {
        LaunchCommand.watchLauncher();
        var cfg = loadConfig();
        try {
            try (Collective dist = joinRanks(cfg)) {
                return withTrainer(cfg, System.out, dist, t -> {
                    // a random model scores ~0 and the command would end 0: almost surely a wrong run.name or output_dir
                    // (every rank opens the same folders, so every rank refuses alike)
                    if (!allowRandom && !t.randomModels().isEmpty()) {
                        throw new UserError("run folder " + t.runDir() + " has no checkpoint, and model(s) " + String.join(", ", t.randomModels())
                                + " have no path and no warm start (sft/models): there is nothing trained to evaluate. Check run.name and"
                                + " run.output_dir, or pass --allow-random to evaluate the random initialisation");
                    }
                    if (t.testTaskCount() == 0) {
                        throw new UserError("workflow '" + cfg.orchestra().name() + "' has no held-out tasks to evaluate here: give it a"
                                + " test split (data.test_file with data.source jsonl; data.synthetic's test_size for synthetic tasks)");
                    }
                    java.nio.file.Path dir = t.runDir().resolve("eval");
                    var result = t.evaluateTasks(dir);  // every rank's share of the tasks, merged on every rank; continues a stopped one
                    if (!dist.isMaster()) return;
                    Map<String, Double> m = result.metrics();
                    System.out.println("step " + t.step());
                    int width = Math.max(16, m.keySet().stream().mapToInt(String::length).max().orElse(0));  // eval/<benchmark>/... names
                    m.forEach((k, v) -> System.out.printf("  %-" + width + "s %.4f%n", k, v));
                    var files = result.write(dir, t.step(), t.checkpoint(), cfg.eval());
                    if (result.kept() != null) java.nio.file.Files.deleteIfExists(result.kept());  // its chunks are in the files now
                    System.out.println("written to " + files.get(0) + " (each task's counts: " + files.get(1).getFileName() + ")");
                });
            }
        } catch (UserError e) {
            throw whileTraining(cfg, e);
        }
    }
}
