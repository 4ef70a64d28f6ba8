// PlanCommand.java — `drmas plan CONFIG [key=value ...] [--gpus N] [--gpu-memory GiB]`: a dry run of
// a training run's memory on GPU servers. It reads only the run config and each model's config.json
// (no weights, no tokenizer, no data, no LibTorch), prints per GPU and per model the bytes of the
// weights, master weights, optimiser state, gradients, activations, logits and KV cache, the peak
// of each phase of a step with the models resident, and whether it fits; when it does not, the
// settings to change. The arithmetic is MemoryPlan's. As `drmas train` does, it warns of agents the
// workflow's options leave without a turn (IdleAgents): their models' memory is counted for nothing.
package dev.drmas.cli;

import dev.drmas.config.ConfigException;
import dev.drmas.config.ModelSpec;
import dev.drmas.config.RunConfig;
import dev.drmas.config.RunSettings;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.ModelFileException;
import dev.drmas.tokenizer.BuiltinTokenizer;
import dev.drmas.train.MemoryPlan;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

// bad options exit 1, not picocli's 2: 2 is "does not fit" here
@Command(name = "plan", mixinStandardHelpOptions = true, exitCodeOnInvalidInput = 1,
        description = {"Print the memory a training run needs per GPU: per model the weights, master weights, optimiser state, "
                + "gradients, activations, logits and KV cache, and the peak of each phase (generation, log-prob, update); "
                + "whether it fits and, if not, what to change. Reads only the config and each model's config.json.",
                "Exit status: 0 when it fits, 2 when it does not, 1 for bad input."})
final class PlanCommand implements Callable<Integer> {
    /** The exit status of a plan that does not fit. */
    static final int DOES_NOT_FIT = 2;

    @Spec
    CommandSpec spec;

    @Parameters(index = "0", paramLabel = "CONFIG", description = "run configuration (YAML)")
    Path config;

    @Parameters(index = "1..*", paramLabel = "KEY=VALUE",
            description = "overrides, e.g. models.policy.path=configs/shapes/qwen3-4b rollout.max_batch_tokens=65536")
    List<String> overrides = new ArrayList<>();

    @Option(names = "--gpus", paramLabel = "N", defaultValue = "1",
            description = "data-parallel ranks, one GPU each (the WORLD_SIZE of the run); default ${DEFAULT-VALUE}")
    int gpus;

    @Option(names = "--gpu-memory", paramLabel = "GiB", defaultValue = "80",
            description = "memory of one GPU in GiB; default ${DEFAULT-VALUE}")
    double gpuMemoryGib;

    @Override
    public Integer call() {
        RunConfig cfg = RunCommand.loadConfig(config, overrides);
        if (gpus < 1) throw new UserError("--gpus must be at least 1, got " + gpus);
        if (!(gpuMemoryGib > 0) || Double.isInfinite(gpuMemoryGib)) throw new UserError("--gpu-memory must be a number of GiB > 0, got " + gpuMemoryGib);
        MemoryPlan plan = MemoryPlan.of(cfg, shapes(cfg), new MemoryPlan.Machine(gpus, (long) (gpuMemoryGib * (1L << 30))));
        var out = spec.commandLine().getOut();
        out.print(render(plan, config.toString()));
        out.flush();
        return plan.fits() ? 0 : DOES_NOT_FIT;
    }

    /** Each used model's shape: its folder's config.json, or its family and size with the built-in tokenizer's vocabulary. */
    static Map<String, ModelConfig> shapes(RunConfig cfg) {
        Map<String, ModelConfig> out = new LinkedHashMap<>();
        for (String id : cfg.usedModels()) {
            ModelSpec spec = cfg.models().get(id);
            if (spec.path() == null) {
                out.put(id, spec.toModelConfig(BuiltinTokenizer.VOCAB_SIZE, List.of()));
                continue;
            }
            Path file = spec.path().resolve("config.json");
            try {
                ModelConfig shape = ModelConfig.read(file);
                cfg.checkRowFits(id, shape.maxPositionEmbeddings(), spec.path());  // as the run does when it loads the model
                out.put(id, shape);
            } catch (ConfigException e) {  // bad input, as the config's own errors (exit 1)
                throw new UserError(e.getMessage(), e);
            } catch (ModelFileException e) {
                throw new UserError("models." + id + ".path: " + e.getMessage() + " (drmas plan needs only the model's config.json;"
                        + " the shapes of Qwen3-4B and Qwen2.5-7B-Instruct are in configs/shapes/, e.g. models." + id
                        + ".path=configs/shapes/qwen3-4b)", e);
            }
        }
        return out;
    }

    // ------------------------------------------------------------------ printing

    static String render(MemoryPlan plan, String configName) {
        StringBuilder o = new StringBuilder();
        RunConfig cfg = plan.config();
        MemoryPlan.Machine m = plan.machine();
        boolean shard = cfg.distributed().shardOptimizer() && m.gpus() > 1;
        o.append(String.format(Locale.ROOT, "drmas plan: %s on %d GPU%s x %s (usable %s each: %d%%)%s%n", configName, m.gpus(),
                m.gpus() == 1 ? "" : "s", MemoryPlan.gib(m.bytesPerGpu()), MemoryPlan.gib(m.usableBytes()),
                Math.round(MemoryPlan.USABLE_FRACTION * 100), m.gpus() > 1 ? ", data-parallel" + (shard ? ", optimiser sharded" : "") : ""));
        var rc = cfg.rollout();
        o.append(String.format(Locale.ROOT, "rollout: %d tasks x %d rollouts per step, prompts <= %d + responses <= %d tokens;"
                        + " rollout.max_batch_tokens %s, ppo.max_tokens_per_micro_batch %s (ppo.micro_batch_size %d)%n",
                rc.tasksPerStep(), rc.rolloutsPerTask(), rc.maxPromptTokens(), rc.maxNewTokens(), bound(rc.maxBatchTokens()),
                bound(cfg.ppo().maxTokensPerMicroBatch()), cfg.ppo().microBatchSize()));
        boolean cpu = cfg.run().device() == RunSettings.Device.CPU;
        for (MemoryPlan.ModelPlan mp : plan.models()) model(o, mp, m, shard, cpu);
        o.append(String.format(Locale.ROOT, "%nphases, per GPU (every model resident: %s)%n", String.join(", ",
                plan.models().stream().map(MemoryPlan.ModelPlan::id).toList())));
        o.append(String.format(Locale.ROOT, "  %-12s %12s %12s %12s   %s%n", "phase", "peak", "resident", "transient", "largest transient"));
        for (MemoryPlan.Phase p : plan.phases()) {
            o.append(String.format(Locale.ROOT, "  %-12s %12s %12s %12s   %s%s%n", p.name(), MemoryPlan.gib(p.peak()),
                    MemoryPlan.gib(plan.residentBytes()), MemoryPlan.gib(p.added()), p.largestModel(),
                    p.peak() > m.usableBytes() ? "   <- does not fit" : ""));
        }
        for (MemoryPlan.Phase p : plan.phases()) {
            if (p.held() == 0) continue;
            // each model's generator keeps its prompts until the rollout phase ends, so the others' are
            // still cached while the largest model generates
            List<String> others = new ArrayList<>();
            for (MemoryPlan.ModelPlan mp : plan.models()) {
                if (!mp.id().equals(p.largestModel()) && mp.generation().prefixCache() > 0) {
                    others.add(mp.id() + " " + MemoryPlan.gib(mp.generation().prefixCache()));
                }
            }
            o.append(String.format(Locale.ROOT, "  %s transient: %s of %s's own, plus %s held for the other models: the prompts%n"
                            + "    they keep for reuse (rollout.prefix_cache) stay cached through the phase (%s)%n", p.name(),
                    MemoryPlan.gib(p.transientOfLargest()), p.largestModel(), MemoryPlan.gib(p.held()), String.join(", ", others)));
        }
        MemoryPlan.Phase top = plan.largestPhase();
        if (plan.fits()) {
            o.append(String.format(Locale.ROOT, "fits: yes; the largest phase (%s) peaks at %s of the usable %s per GPU%n", top.name(),
                    MemoryPlan.gib(top.peak()), MemoryPlan.gib(m.usableBytes())));
        } else {
            o.append(String.format(Locale.ROOT, "fits: no; %s peaks at %s of the usable %s per GPU. Change:%n", top.name(),
                    MemoryPlan.gib(top.peak()), MemoryPlan.gib(m.usableBytes())));
            for (String a : plan.advice()) o.append("  ").append(a).append('\n');
        }
        o.append("notes: worst case (every prompt and response at its maximum); LibTorch's allocator, the CUDA context and\n"
                + "  NCCL buffers are the other 10%; the training and log-prob forwards (right-padded, no cache) attend causally\n"
                + "  without a mask; the prefill's attention keeps its mask as a [rows, 1, T, T] tensor of the model's dtype per\n"
                + "  layer, as LibTorch's CPU kernel does, and on a GPU copies k and v to the query heads of a grouped-query model\n"
                + "  (measured on the CPU; not on a GPU).\n");
        // as `drmas train` warns: such a model still takes its memory above, for nothing
        for (String w : dev.drmas.config.IdleAgents.warnings(cfg)) o.append("warning: ").append(w).append('\n');
        return o.toString();
    }

    private static void model(StringBuilder o, MemoryPlan.ModelPlan mp, MemoryPlan.Machine m, boolean shard, boolean cpu) {
        ModelConfig c = mp.shape();
        ModelSpec s = mp.spec();
        String dt = s.dtype().configName(), master = s.masterDtype().configName(), w = shard ? ", 1/" + m.gpus() : "";
        o.append(String.format(Locale.ROOT, "%nmodel %s (agents %s): %s, %d layers, hidden %d, heads %d/%d kv, vocab %d, %.2f B parameters;"
                        + " %s, master %s, activation checkpointing %s%n", mp.id(), String.join(", ", mp.agents()),
                c.family().modelType(), c.numLayers(), c.hiddenSize(), c.numHeads(), c.numKvHeads(), c.vocabSize(), mp.params() / 1e9,
                dt, master, s.activationCheckpointing() ? "on" : "off"));
        MemoryPlan.Resident r = mp.resident();
        boolean mixed = s.mixedPrecision();
        o.append("  resident in every phase, per GPU\n");
        line(o, "  weights (" + dt + ")", r.weights());
        boolean masters = mixed || shard;  // a sharded optimiser keeps fp32 masters of its chunk whatever the dtype
        line(o, "  master weights" + (masters ? " (float32" + w + ")" : " (the weights themselves)"), masters ? r.masterWeights() : 0);
        line(o, "  optimiser moments (2 x " + (shard ? "float32" : master) + w + ")", r.moments());
        line(o, "  gradients (" + dt + " .grad)", r.gradients());
        line(o, "  gradient accumulator" + (shard ? " (float32" + w + ")" : mixed ? " (float32)" : " (the .grad itself)"),
                r.gradAccumulator());
        line(o, "  reference model" + (r.reference() > 0 ? " (" + dt + ")" : " (ppo.reference_model off)"), r.reference());
        line(o, "  total", r.total());
        MemoryPlan.Generation g = mp.generation();
        o.append(String.format(Locale.ROOT, "  generation: batches of %d rows x (%d prompt + %d new) tokens%n", g.rows(), g.promptTokens(),
                g.capacity() - g.promptTokens()));
        line(o, "  KV cache", g.kvCache());
        if (g.prefillCache() > 0) line(o, "  prefill cache (continuous engine)", g.prefillCache());
        if (g.prefixCache() > 0) line(o, "  prompts kept for reuse (rollout.prefix_cache)", g.prefixCache());
        if (g.stems() > 0) line(o, "  prompt stems shared by a joining group (one a task)", g.stems());
        line(o, "  prefill (activations of the forward)", g.prefill());
        line(o, "  last-position logits and sampling", g.logits());
        line(o, "  generation transient", g.added());
        MemoryPlan.MicroBatch mb = mp.logProbBatch();
        MemoryPlan.Update u = mp.update();
        MemoryPlan.FusedHead fh = u.fusedHead();
        o.append(String.format(Locale.ROOT, "  log-prob and update: micro-batches of %d tokens (rows of <= %d), %d response tokens%n",
                mb.tokens(), mb.rowTokens(), mb.responseTokens()));
        line(o, "  activations, no checkpointing", u.activations());
        line(o, "  activations, checkpointing", u.activationsCheckpointed());
        // the LM head's two ways side by side: what ppo.fused_lm_head buys
        o.append(String.format(Locale.ROOT, "    %-60s %12s %12s%n", "  with the LM head (ppo.fused_lm_head: " + u.fused() + ")",
                "materialised", "fused"));
        line2(o, "  the LM head's own tensors (update)", u.materialisedHeadBytes(), fh.peak());
        line2(o, "  log-prob pass peak (" + mp.logProbPasses() + (mp.logProbPasses() == 1 ? " pass: old log-probs)" : " passes: old and reference)"),
                mp.logProbPeakMaterialised(), mp.logProbPeakFused());
        line2(o, "  update micro-batch peak, no checkpointing" + (u.checkpointing() ? "" : "  <- configured"), u.peak(false, false),
                u.peak(false, true));
        line2(o, "  update micro-batch peak, checkpointing" + (u.checkpointing() ? "  <- configured" : ""), u.peak(true, false),
                u.peak(true, true));
        boolean reduced = s.dtype() != ModelSpec.Dtype.FLOAT32;
        o.append(String.format(Locale.ROOT, "      (materialised: %d x [N, V] float32 of %s at the end of the forward; fused%s:%n"
                        + "       chunks of %d tokens, %s each, and across them dL/dh [N, H]%s, %s%s)%n", u.logitsTensors(),
                MemoryPlan.gib(u.logitsBytes()), cpu ? "" : ", not yet run on a GPU", fh.chunkTokens(), MemoryPlan.gib(fh.chunkBytes()),
                reduced ? " and a float32 dL/dW [V, H]" : "", MemoryPlan.gib(fh.heldBytes()), fh.finishBytes() > 0
                        ? ";\n       then 2 x [" + Math.min(c.vocabSize(), dev.drmas.algo.FusedLmHead.GRAD_ADD_ROWS) + ", H] float32 while dL/dW is added into the "
                        + s.dtype().configName() + " .grad a block of rows at a time" : ""));
        line(o, "  optimiser step (norm in float64" + (shard ? ", all-gather of the weights)" : ")"), u.stepTransient());
    }

    private static void line2(StringBuilder o, String what, long materialised, long fused) {
        o.append(String.format(Locale.ROOT, "    %-60s %12s %12s%n", what, MemoryPlan.gib(materialised), MemoryPlan.gib(fused)));
    }

    private static void line(StringBuilder o, String what, long bytes) {
        o.append(String.format(Locale.ROOT, "    %-60s %12s%n", what, bytes == 0 ? "-" : MemoryPlan.gib(bytes)));
    }

    private static String bound(int v) {
        return v == 0 ? "0 (no bound)" : Integer.toString(v);
    }
}
