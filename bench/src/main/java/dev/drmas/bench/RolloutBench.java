// RolloutBench.java — the rollout phase of real toy training steps, static engine against
// continuous batching in the same process: for each workflow config (the toy search and the toy
// math step by default) a short supervised warm start (so that responses have the workflows' mix
// of lengths: verdicts of a few tokens, queries and answers longer), then two trainers from that
// warm start, one per rollout.engine, stepping in turn; per step the trainer's own time/rollout_s,
// and the generated tokens and reward, which must be the same for both (same tokens).
package dev.drmas.bench;

import dev.drmas.config.RunConfig;
import dev.drmas.train.Trainer;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.global.torch;

public final class RolloutBench {
    private RolloutBench() {
    }

    /** One config's figures: per engine and step, rollout seconds, generated tokens, mean reward. */
    record Result(String config, double[][] seconds, long[][] tokens, double[][] reward) {
        double median(int engine) {
            return BenchSupport.median(seconds[engine]);
        }
    }

    static final String[] ENGINES = {"static", "continuous"};

    public static void main(String[] argv) throws IOException {
        List<String> configs = List.of("configs/search-toy-drmas.yaml", "configs/math-toy-drmas.yaml");
        int steps = 5, sftSteps = 150, threads = 2;
        Path out = null, work = null;
        for (int i = 0; i < argv.length; i++) {
            switch (argv[i]) {
                case "--configs" -> configs = Arrays.stream(argv[++i].split(",")).map(String::trim).toList();
                case "--steps" -> steps = Integer.parseInt(argv[++i]);
                case "--sft-steps" -> sftSteps = Integer.parseInt(argv[++i]);
                case "--threads" -> threads = Integer.parseInt(argv[++i]);
                case "--work" -> work = Path.of(argv[++i]);
                case "--out" -> out = Path.of(argv[++i]);
                case "--help", "-h" -> {
                    System.out.println("""
                            usage: drmas bench-rollout [--configs configs/search-toy-drmas.yaml,configs/math-toy-drmas.yaml]
                                   [--steps 5] [--sft-steps 150] [--threads 2] [--work DIR] [--out FILE.md]""");
                    return;
                }
                default -> throw new IllegalArgumentException("unknown option " + argv[i] + " (see --help)");
            }
        }
        torch.set_num_threads(threads);
        if (work == null) work = Files.createTempDirectory("drmas-bench-rollout");
        List<Result> results = new ArrayList<>();
        PrintStream quiet = new PrintStream(OutputStream.nullOutputStream());
        for (String config : configs) results.add(measure(Path.of(config), steps, sftSteps, threads, work, quiet));
        String report = report(results, steps, sftSteps, threads);
        System.out.println(report);
        if (out != null) {
            Files.writeString(out, report);
            System.out.println("written to " + out.toAbsolutePath());
        }
    }

    static Result measure(Path config, int steps, int sftSteps, int threads, Path work, PrintStream log) throws IOException {
        String name = config.getFileName().toString().replaceFirst("\\.yaml$", "");
        List<String> common = List.of("run.output_dir=" + work, "run.resume=never", "run.threads=" + threads, "trainer.eval_freq=0",
                "trainer.eval_before_train=false", "trainer.save_freq=0");
        List<String> warm = new ArrayList<>(common);
        warm.addAll(List.of("run.name=" + name + "-sft", "sft.steps=" + sftSteps));
        Path weights;
        try (Trainer t = Trainer.open(RunConfig.load(config, warm), log)) {
            t.sft();
            weights = t.runDir().resolve("sft").resolve("models");
        }
        double[][] seconds = new double[2][steps];
        long[][] tokens = new long[2][steps];
        double[][] reward = new double[2][steps];
        Trainer[] trainers = new Trainer[2];
        try {
            for (int e = 0; e < 2; e++) {
                List<String> o = new ArrayList<>(common);
                o.addAll(List.of("run.name=" + name + "-" + ENGINES[e], "run.warm_start=" + weights, "rollout.engine=" + ENGINES[e]));
                trainers[e] = Trainer.open(RunConfig.load(config, o), log);
            }
            for (int s = 0; s < steps; s++) {
                for (int e = 0; e < 2; e++) {
                    Map<String, Double> m = trainers[e].trainStep();
                    seconds[e][s] = m.get("time/rollout_s");
                    tokens[e][s] = Math.round(m.get("perf/gen_tokens_per_s") * seconds[e][s]);
                    reward[e][s] = m.get("reward/mean");
                }
                System.out.printf("%s step %d: static %.3f s (%d tokens), continuous %.3f s (%d tokens)%n", name, s + 1,
                        seconds[0][s], tokens[0][s], seconds[1][s], tokens[1][s]);
            }
        } finally {
            for (Trainer t : trainers) if (t != null) t.close();
        }
        return new Result(name, seconds, tokens, reward);
    }

    static String report(List<Result> rs, int steps, int sftSteps, int threads) {
        StringBuilder sb = new StringBuilder();
        sb.append(Instant.now()).append(" · JDK ").append(Runtime.version()).append(" · ")
                .append(Runtime.getRuntime().availableProcessors()).append(" CPUs · LibTorch threads ").append(threads).append('\n');
        sb.append("The rollout phase (time/rollout_s) of ").append(steps).append(" training steps after a ").append(sftSteps)
                .append("-step supervised warm start, the static engine and continuous batching stepping in turn from the same")
                .append(" weights; median over the steps.\n\n");
        sb.append("| config | static s | continuous s | static / continuous | tokens a step (both) | same tokens and rewards |\n");
        sb.append("|---|---:|---:|---:|---:|---|\n");
        for (Result r : rs) {
            boolean same = Arrays.equals(r.tokens()[0], r.tokens()[1]) && Arrays.equals(r.reward()[0], r.reward()[1]);
            long total = Arrays.stream(r.tokens()[1]).sum();
            sb.append(String.format("| %s | %.3f | %.3f | %.2f× | %d | %s |%n", r.config(), r.median(0), r.median(1),
                    r.median(0) / r.median(1), total / r.tokens()[1].length, same ? "yes" : "NO: " + Arrays.toString(r.tokens()[0])
                            + " vs " + Arrays.toString(r.tokens()[1])));
        }
        return sb.toString();
    }
}
