// EvalCommand.java — `drmas eval CONFIG [key=value ...]`: avg@n and pass@k of the run's latest
// checkpoint (or its starting models) on the held-out tasks, with the eval sampling settings.
package dev.drmas.cli;

import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

@Command(name = "eval", mixinStandardHelpOptions = true,
        description = {"Evaluate the run's latest checkpoint (or its starting models: a path or the warm start) on the held-out tasks:",
                "avg@n, pass@k. A run with nothing trained to start from is refused unless --allow-random."})
final class EvalCommand extends RunCommand {
    @Option(names = "--allow-random", description = "evaluate models that have no weights yet (random initialisation) instead of refusing")
    boolean allowRandom;

    @Override
    public Integer call() throws Exception {
        var cfg = loadConfig();
        return withTrainer(cfg, System.out, t -> {
            // a random model scores ~0 and the command would end 0: almost surely a wrong run.name or output_dir
            if (!allowRandom && !t.randomModels().isEmpty()) {
                throw new UserError("run folder " + t.runDir() + " has no checkpoint, and model(s) " + String.join(", ", t.randomModels())
                        + " have no path and no warm start (sft/models): there is nothing trained to evaluate. Check run.name and"
                        + " run.output_dir, or pass --allow-random to evaluate the random initialisation");
            }
            Map<String, Double> m = t.evaluate();
            System.out.println("step " + t.step());
            int width = Math.max(16, m.keySet().stream().mapToInt(String::length).max().orElse(0));  // eval/<benchmark>/... names
            m.forEach((k, v) -> System.out.printf("  %-" + width + "s %.4f%n", k, v));
        });
    }
}
