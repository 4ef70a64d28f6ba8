// DemoCommand.java — `drmas demo`, the main job on a fresh machine: warm-starts the tiny
// solver–verifier team of configs/math-toy-drmas.yaml on demonstrations, trains it with Dr. MAS
// on synthetic arithmetic on the CPU, evaluates before and after, and prints what happened and
// where the run directory and TensorBoard logs are. Re-running resumes the run where it stopped.
package dev.drmas.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.config.RunConfig;
import dev.drmas.metrics.RunReport;
import dev.drmas.train.Checkpoints;
import dev.drmas.train.RunLock;
import dev.drmas.train.Trainer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

@Command(name = "demo", mixinStandardHelpOptions = true,
        description = {"Warm-start, train with Dr. MAS and evaluate a tiny solver-verifier team on synthetic arithmetic (CPU).",
                "Re-running continues the run; --fresh starts over."})
final class DemoCommand implements Callable<Integer> {

    @Option(names = "--config", defaultValue = "${env:DRMAS_HOME:-.}/configs/math-toy-drmas.yaml", paramLabel = "CONFIG",
            description = "run configuration (default ${DEFAULT-VALUE})")
    Path config;

    @Option(names = "--fresh", description = "delete the run directory first")
    boolean fresh;

    @Parameters(arity = "0..*", paramLabel = "KEY=VALUE", description = "config overrides, e.g. trainer.steps=10")
    List<String> overrides = new ArrayList<>();

    @Override
    public Integer call() throws Exception {
        RunConfig cfg = RunCommand.loadConfig(config, overrides);
        Path runDir = cfg.run().runDir();
        // the lock first: --fresh must not delete a folder another process is training in
        try (RunLock lock = RunCommand.lock(cfg)) {
            // the README's experiment uses the demo's config: its folder must not become the demo's (--fresh would delete it)
            if (ExperimentCommand.holdsExperiment(runDir)) {
                throw new UserError(runDir + " holds an experiment (drmas experiment), not the demo's run: give the demo another "
                        + "run.name=..." + (fresh ? "; --fresh would delete the experiment's runs" : ""));
            }
            if (fresh) clear(runDir);
            System.out.println("drmas demo: " + cfg.agents().size() + " agents, mode " + cfg.algorithm().mode().configName()
                    + ", " + (cfg.trainer().epochs() > 0 ? cfg.trainer().epochs() + " epoch(s) in steps" : cfg.trainer().steps() + " steps")
                    + " of " + cfg.rollout().tasksPerStep() + " tasks x "
                    + cfg.rollout().rolloutsPerTask() + " rollouts; run directory " + runDir);
            long t0 = System.nanoTime();
            boolean warm = Files.isDirectory(runDir.resolve("sft").resolve("models"));
            boolean checkpointed = Files.isDirectory(runDir.resolve("checkpoints"));
            if (!warm && !checkpointed && cfg.sft().steps() > 0) {
                System.out.println("1/2 supervised warm start (" + cfg.sft().steps() + " steps)");
                RunConfig sftCfg = cfg.withOverrides(List.of("run.resume=never"));
                RunCommand.withTrainer(sftCfg, System.out, Trainer::sft);
            }
            System.out.println("2/2 reinforcement learning with " + cfg.algorithm().mode().configName());
            int stopped = RunCommand.withTrainer(cfg, System.out, Trainer::train);
            if (stopped != 0) return stopped;  // a signal stopped it after its save: the same command continues
            double minutes = (System.nanoTime() - t0) / 60e9;
            if (Files.isRegularFile(runDir.resolve("metrics.jsonl"))) {
                report(runDir, minutes, cfg.metrics().tensorboard());
                try {
                    System.out.println("report:          " + RunReport.write(List.of(runDir), runDir.resolve("report.html")).toAbsolutePath());
                } catch (IllegalArgumentException e) {
                    throw new UserError("the report of " + runDir + ": " + e.getMessage(), e);
                }
            } else {  // metrics.jsonl=false: trained, but nothing to tabulate
                System.out.printf("%nrun directory:   %s (metrics.jsonl=false: no table, no report)%ntime:            %.1f min%n",
                        runDir.toAbsolutePath(), minutes);
            }
        }
        return 0;
    }

    /** Everything in the run folder but the lock file (which this process holds). */
    private static void clear(Path runDir) throws IOException {
        try (var children = Files.list(runDir)) {
            for (Path p : children.toList()) if (!p.getFileName().toString().equals(RunLock.FILE)) Checkpoints.deleteTree(p);
        }
    }

    /**
     * Before/after table from metrics.jsonl: the first and the last evaluation; the TensorBoard
     * command only when {@code tensorboard} (metrics.tensorboard) wrote its folder.
     */
    static void report(Path runDir, double minutes, boolean tensorboard) throws IOException {
        Path file = runDir.resolve("metrics.jsonl");
        List<JsonNode> evals = new ArrayList<>();
        JsonNode lastTrain = null;
        ObjectMapper m = new ObjectMapper();
        for (String line : Files.readAllLines(file)) {
            JsonNode n = m.readTree(line);
            if (n.has("eval/pass@1")) evals.add(n);
            if (n.has("reward/mean")) lastTrain = n;
        }
        System.out.println();
        if (evals.size() >= 1) {
            JsonNode first = evals.get(0), last = evals.get(evals.size() - 1);
            Map<String, String> keys = new LinkedHashMap<>();
            first.fieldNames().forEachRemaining(k -> {  // in both: eval.k may have changed when the run resumed
                if ((k.startsWith("eval/avg@") || k.startsWith("eval/pass@")) && last.path(k).isNumber()) keys.put(k, k.substring(5));
            });
            System.out.printf("%-10s %12s %12s%n", "held-out", "step " + first.get("step").asInt(), "step " + last.get("step").asInt());
            keys.forEach((k, label) -> System.out.printf("%-10s %12.3f %12.3f%n", label, first.get(k).asDouble(), last.get(k).asDouble()));
        }
        if (lastTrain != null) {
            System.out.printf("last step: reward %.3f", lastTrain.get("reward/mean").asDouble());
            JsonNode train = lastTrain;
            train.fieldNames().forEachRemaining(k -> {  // every agent's: agent/<id>/inflation
                if (k.startsWith("agent/") && k.endsWith("/inflation") && train.get(k).isNumber()) {
                    System.out.printf(", %s inflation (σ_k²+(μ_k−μ)²)/σ² %.2f", k.substring(6, k.length() - 10), train.get(k).asDouble());
                }
            });
            System.out.println();
        }
        System.out.printf("%nrun directory:   %s%nmetrics:         %s%n", runDir.toAbsolutePath(), file.toAbsolutePath());
        if (tensorboard) System.out.printf("tensorboard:     tensorboard --logdir %s%n", runDir.resolve("tensorboard").toAbsolutePath());
        System.out.printf("checkpoints:     %s%ntime:            %.1f min%n", runDir.resolve("checkpoints").toAbsolutePath(), minutes);
    }
}
