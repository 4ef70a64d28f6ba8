// EvalCommand.java — `drmas eval CONFIG [key=value ...]`: avg@n and pass@k of the run's latest
// checkpoint (or its starting models) on the held-out tasks, with the eval sampling settings.
package dev.drmas.cli;

import java.util.Map;
import picocli.CommandLine.Command;

@Command(name = "eval", mixinStandardHelpOptions = true,
        description = "Evaluate the run's latest checkpoint (or its starting models) on the held-out tasks: avg@n, pass@k.")
final class EvalCommand extends RunCommand {
    @Override
    public Integer call() throws Exception {
        var cfg = loadConfig();
        return withTrainer(cfg, System.out, t -> {
            Map<String, Double> m = t.evaluate();
            System.out.println("step " + t.step());
            m.forEach((k, v) -> System.out.printf("  %-16s %.4f%n", k, v));
        });
    }
}
