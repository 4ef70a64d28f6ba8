// RolloutBench.java — the rollout phase of real toy training steps, static engine against
// continuous batching in the same process: for each workflow config (the toy search and the toy
// math step by default) a short supervised warm start (so that responses have the workflows' mix
// of lengths: verdicts of a few tokens, queries and answers longer), then four trainers from that
// warm start — the static engine with LibTorch's decoding step and sampler (the engine issue 18
// measured), the static engine, the continuous one without and with the prompts kept across a
// phase's calls (rollout.prefix_cache), the last three decoding in libdrmas — stepping in turn;
// per step the trainer's own time/rollout_s, the prompt tokens it prefilled, and the generated
// tokens and reward, which must be the same for all (same tokens).
package dev.drmas.bench;

import dev.drmas.config.RunConfig;
import dev.drmas.rollout.Sampler;
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

    /** One config's figures: per variant and step, rollout seconds, generated tokens, mean reward, prefilled and prompt tokens. */
    record Result(String config, double[][] seconds, long[][] tokens, double[][] reward, long[][] prefilled, long[] prompt) {
        double median(int variant) {
            return BenchSupport.median(seconds[variant]);
        }
    }

    /**
     * The variants: a name and the overrides that make it. The first is the engine as issue 18
     * found it: the static engine with LibTorch's decoding step and sampler (CausalLm.decodeNative
     * and Sampler.useNative off around its steps); the others decode in libdrmas.
     */
    static final String[] NAMES = {"static, LibTorch step (the issue's engine)", "static", "continuous, no prefix cache", "continuous"};
    static final List<List<String>> VARIANTS = List.of(List.of("rollout.engine=static"), List.of("rollout.engine=static"),
            List.of("rollout.engine=continuous", "rollout.prefix_cache=false"),
            List.of("rollout.engine=continuous", "rollout.prefix_cache=true"));

    public static void main(String[] argv) throws IOException {
        // the checkout's toy configs (the launcher names it in DRMAS_HOME and runs this in the caller's directory)
        String home = System.getenv().getOrDefault("DRMAS_HOME", ".");
        List<String> configs = List.of(home + "/configs/search-toy-drmas.yaml", home + "/configs/math-toy-drmas.yaml");
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
        int n = VARIANTS.size();
        double[][] seconds = new double[n][steps];
        long[][] tokens = new long[n][steps], prefilled = new long[n][steps];
        long[] prompt = new long[steps];
        double[][] reward = new double[n][steps];
        Trainer[] trainers = new Trainer[n];
        try {
            for (int e = 0; e < n; e++) {
                List<String> o = new ArrayList<>(common);
                o.addAll(List.of("run.name=" + name + "-" + e, "run.warm_start=" + weights));
                o.addAll(VARIANTS.get(e));
                trainers[e] = Trainer.open(RunConfig.load(config, o), log);
            }
            for (int s = 0; s < steps; s++) {
                StringBuilder line = new StringBuilder(name + " step " + (s + 1) + ":");
                for (int e = 0; e < n; e++) {
                    boolean libtorch = e == 0;
                    for (var model : trainers[e].models().values()) model.decodeNative(!libtorch);
                    Sampler.useNative(!libtorch);
                    Map<String, Double> m;
                    try {
                        m = trainers[e].trainStep();
                    } finally {
                        Sampler.useNative(true);
                    }
                    seconds[e][s] = m.get("time/rollout_s");
                    tokens[e][s] = Math.round(m.get("perf/gen_tokens_per_s") * seconds[e][s]);
                    reward[e][s] = m.get("reward/mean");
                    prefilled[e][s] = Math.round(m.get("perf/prefilled_tokens"));
                    prompt[s] = Math.round(m.get("perf/prompt_tokens"));
                    line.append(String.format(" %s %.3f s (%d tokens, %d prefilled)", NAMES[e], seconds[e][s], tokens[e][s], prefilled[e][s]));
                }
                System.out.println(line);
            }
        } finally {
            for (Trainer t : trainers) if (t != null) t.close();
        }
        return new Result(name, seconds, tokens, reward, prefilled, prompt);
    }

    static String report(List<Result> rs, int steps, int sftSteps, int threads) {
        StringBuilder sb = new StringBuilder();
        sb.append(Instant.now()).append(" · JDK ").append(Runtime.version()).append(" · ")
                .append(Runtime.getRuntime().availableProcessors()).append(" CPUs · LibTorch threads ").append(threads).append('\n');
        sb.append("The rollout phase (time/rollout_s) of ").append(steps).append(" training steps after a ").append(sftSteps)
                .append("-step supervised warm start, stepping in turn from the same weights: the static engine with LibTorch's")
                .append(" decoding step and sampler (the engine issue 18 measured), the static engine and continuous batching")
                .append(" (without and with the prompts kept across the phase's calls, rollout.prefix_cache) with libdrmas's; median")
                .append(" over the steps; prompt tokens prefilled a step (the static engine's padding included), mean over the steps.\n\n");
        sb.append("| config | variant | rollout s | the issue's engine / this | static / this | prefilled tokens a step (of prompt tokens) | tokens a step |\n");
        sb.append("|---|---|---:|---:|---:|---:|---:|\n");
        for (Result r : rs) {
            long prompt = Arrays.stream(r.prompt()).sum() / r.prompt().length;
            for (int e = 0; e < NAMES.length; e++) {
                sb.append(String.format("| %s | %s | %.3f | %.2f× | %.2f× | %d (%d) | %d |%n", r.config(), NAMES[e], r.median(e),
                        r.median(0) / r.median(e), r.median(1) / r.median(e), Arrays.stream(r.prefilled()[e]).sum() / r.prefilled()[e].length, prompt,
                        Arrays.stream(r.tokens()[e]).sum() / r.tokens()[e].length));
            }
            boolean same = true;
            for (int e = 1; e < NAMES.length; e++) {
                same &= Arrays.equals(r.tokens()[0], r.tokens()[e]) && Arrays.equals(r.reward()[0], r.reward()[e]);
            }
            sb.append(String.format("%nSame tokens and rewards in every step (%s): %s%n", r.config(), same ? "yes" : "NO: "
                    + Arrays.deepToString(r.tokens()) + " " + Arrays.deepToString(r.reward())));
        }
        return sb.toString();
    }
}
