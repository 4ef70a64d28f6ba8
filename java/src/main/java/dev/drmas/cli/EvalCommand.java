// EvalCommand.java — `drmas eval CONFIG [key=value ...]`: avg@n and pass@k of the run's latest
// checkpoint (or its starting models) on the held-out tasks, with the eval sampling settings. As one
// rank of a data-parallel evaluation when the torchrun variables (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT) say so, as `drmas train` (`drmas launch --eval` starts such ranks): the paper's
// avg@16 over a whole test set is 16 rollouts a task, too many for one GPU.
package dev.drmas.cli;

import dev.drmas.dist.Collective;
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

    @Override
    public Integer call() throws Exception {
        LaunchCommand.watchLauncher();
        var cfg = loadConfig();
        try (Collective dist = joinRanks(cfg)) {
            return withTrainer(cfg, System.out, dist, t -> {
                // a random model scores ~0 and the command would end 0: almost surely a wrong run.name or output_dir
                // (every rank opens the same folders, so every rank refuses alike)
                if (!allowRandom && !t.randomModels().isEmpty()) {
                    throw new UserError("run folder " + t.runDir() + " has no checkpoint, and model(s) " + String.join(", ", t.randomModels())
                            + " have no path and no warm start (sft/models): there is nothing trained to evaluate. Check run.name and"
                            + " run.output_dir, or pass --allow-random to evaluate the random initialisation");
                }
                Map<String, Double> m = t.evaluate();  // every rank's share of the tasks, merged on every rank
                if (!dist.isMaster()) return;
                System.out.println("step " + t.step());
                int width = Math.max(16, m.keySet().stream().mapToInt(String::length).max().orElse(0));  // eval/<benchmark>/... names
                m.forEach((k, v) -> System.out.printf("  %-" + width + "s %.4f%n", k, v));
            });
        }
    }
}
