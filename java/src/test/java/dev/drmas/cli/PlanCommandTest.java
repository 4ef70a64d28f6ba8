// PlanCommandTest.java — `drmas plan` on the shipped GPU-server configs with the model shapes of
// configs/shapes: the math (shared and non-shared) and search configs fit 8 x 80 GiB as shipped; a machine too small gets advice, and
// the advice applied as overrides makes the plan fit (so the advice is checked, not only printed),
// with the fused LM head among it (marked as not yet run on a GPU); a model folder without config.json is an error that names the key and configs/shapes;
// rows longer than the model's positions are refused as the run refuses them; a bad option exits 1, not 2
// ("does not fit"); an agent the workflow's options leave without a turn is warned of, as `drmas train` does.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PlanCommandTest {
    @TempDir
    Path tmp;

    static final String MATH = "../configs/math-qwen3-4b.yaml", QWEN3 = "models.policy.path=../configs/shapes/qwen3-4b";

    @Test
    void theMathConfigFitsEightGpusOf80GiB() {
        Cli.Run r = Cli.run("plan", MATH, QWEN3, "--gpus", "8", "--gpu-memory", "80");
        assertEquals(0, r.exit(), r.out() + r.err());
        assertTrue(r.out().contains("4.02 B parameters"), r.out());
        assertTrue(r.out().contains("master weights (float32, 1/8)"), r.out());
        // the LM head's two columns, the configured one named; the fused one not yet run on a GPU (run.device: cuda)
        assertTrue(r.out().contains("with the LM head (ppo.fused_lm_head: false)") && r.out().contains("materialised        fused"),
                r.out());
        assertTrue(Pattern.compile("update micro-batch peak, checkpointing  <- configured +40\\.37 GiB +\\d+\\.\\d\\d GiB").matcher(r.out())
                .find(), r.out());
        assertTrue(r.out().contains("fused, not yet run on a GPU:") && r.out().contains("chunks of 220 tokens"), r.out());
        assertTrue(r.out().contains("fits: yes"), r.out());
    }

    @Test
    void theNonSharedMathConfigFitsEightGpusOf80GiB() {
        // two Qwen3-4B resident: with its smaller generation batches and the fused LM head, as its comment says
        Cli.Run r = Cli.run("plan", "../configs/math-qwen3-4b-nonshared.yaml", "models.solver.path=../configs/shapes/qwen3-4b",
                "models.verifier.path=../configs/shapes/qwen3-4b", "--gpus", "8", "--gpu-memory", "80");
        assertEquals(0, r.exit(), r.out() + r.err());
        assertTrue(r.out().contains("model solver (agents solver)") && r.out().contains("model verifier (agents verifier)"), r.out());
        assertTrue(r.out().contains("generation: batches of 4 rows x (8192 prompt + 4096 new) tokens"), r.out());
        assertTrue(r.out().contains("fits: yes"), r.out());
        // the materialised head there does not fit 80 GiB, and does 141 GiB, as the comment says too
        Cli.Run materialised = Cli.run("plan", "../configs/math-qwen3-4b-nonshared.yaml", "models.solver.path=../configs/shapes/qwen3-4b",
                "models.verifier.path=../configs/shapes/qwen3-4b", "--gpus", "8", "--gpu-memory", "80", "ppo.fused_lm_head=false");
        assertEquals(PlanCommand.DOES_NOT_FIT, materialised.exit(), materialised.out() + materialised.err());
        Cli.Run large = Cli.run("plan", "../configs/math-qwen3-4b-nonshared.yaml", "models.solver.path=../configs/shapes/qwen3-4b",
                "models.verifier.path=../configs/shapes/qwen3-4b", "--gpus", "8", "--gpu-memory", "141", "ppo.fused_lm_head=false");
        assertEquals(0, large.exit(), large.out() + large.err());
    }

    @Test
    void theSearchConfigFitsEightGpusOf80GiB() {
        // as its comment says: 800 new tokens a turn and the entropy bonus within 8 x 80 GiB, with the materialised head
        Cli.Run r = Cli.run("plan", "../configs/search-qwen2.5-7b.yaml", "models.policy.path=../configs/shapes/qwen2.5-7b",
                "--gpus", "8", "--gpu-memory", "80");
        assertEquals(0, r.exit(), r.out() + r.err());
        assertTrue(r.out().contains("responses <= 800 tokens"), r.out());
        assertTrue(r.out().contains("fits: yes"), r.out());
    }

    @Test
    void thePrefixCacheLineIsThereOnlyWhenTheCacheIsOn() {
        // the continuous engine's prefix cache holds the stems of a joining group's prompts either way; the prompts kept
        // for later turns only with rollout.prefix_cache on (its 1.13 GiB line was printed with it off too)
        Cli.Run off = Cli.run("plan", MATH, QWEN3, "--gpus", "8", "--gpu-memory", "80", "rollout.prefix_cache=false");
        assertEquals(0, off.exit(), off.out() + off.err());
        assertTrue(!off.out().contains("rollout.prefix_cache"), off.out());
        assertTrue(Pattern.compile("prompt stems shared by a joining group \\(one a task\\) +1\\.13 GiB").matcher(off.out()).find(),
                off.out());
        // as the shipped config's comment says: the cache on adds 15 GiB a GPU, too much for 80 GiB ones
        Cli.Run on = Cli.run("plan", MATH, QWEN3, "--gpus", "8", "--gpu-memory", "80", "rollout.prefix_cache=true");
        assertEquals(PlanCommand.DOES_NOT_FIT, on.exit(), on.out() + on.err());
        assertTrue(Pattern.compile("prompts kept for reuse \\(rollout.prefix_cache\\) +15\\.19 GiB").matcher(on.out()).find(),
                on.out());
        assertTrue(on.out().contains("prompt stems shared by a joining group (one a task)"), on.out());
    }

    /**
     * Two Qwen3-4B models, each generator keeping its prompts for reuse until the rollout phase
     * ends: the generation phase's peak holds the other model's kept prompts besides the generating
     * model's transient, and a line says so (the plan counted one model's cache only).
     */
    @Test
    void twoModelsGenerationHoldsTheOtherModelsKeptPrompts() throws java.io.IOException {
        String shape = Path.of("../configs/shapes/qwen3-4b").toAbsolutePath().normalize().toString();
        Path yaml = tmp.resolve("two.yaml");
        java.nio.file.Files.writeString(yaml, """
                run: {device: cuda}
                models:
                  solver_model: {path: %1$s, dtype: bfloat16, master_dtype: float32, activation_checkpointing: true}
                  verifier_model: {path: %1$s, dtype: bfloat16, master_dtype: float32, activation_checkpointing: true}
                agents:
                  - {id: solver, role: solver, model: solver_model}
                  - {id: verifier, role: verifier, model: verifier_model}
                orchestra: {name: math, options: {max_loops: 2}}
                rollout: {tasks_per_step: 32, rollouts_per_task: 8, max_new_tokens: 1024, max_prompt_tokens: 4096, prefix_cache: true}
                ppo: {updates_per_step: 1, max_tokens_per_micro_batch: 16384}
                trainer: {eval_freq: 0}
                """.formatted(shape));
        Cli.Run r = Cli.run("plan", yaml.toString(), "--gpus", "8", "--gpu-memory", "192", "distributed.shard_optimizer=true");
        assertEquals(0, r.exit(), r.out() + r.err());
        Matcher kept = Pattern.compile("prompts kept for reuse \\(rollout.prefix_cache\\) +(\\d+\\.\\d\\d) GiB").matcher(r.out());
        assertTrue(kept.find(), r.out());
        String k = kept.group(1);  // one model's, the same for both
        Matcher own = Pattern.compile("generation transient +(\\d+\\.\\d\\d) GiB").matcher(r.out());
        assertTrue(own.find(), r.out());
        double transientOfOne = Double.parseDouble(own.group(1));
        Matcher gen = Pattern.compile("(?m)^  generation +(\\d+\\.\\d\\d) GiB +(\\d+\\.\\d\\d) GiB +(\\d+\\.\\d\\d) GiB +solver_model$")
                .matcher(r.out());
        assertTrue(gen.find(), r.out());
        // peak = resident + the generating model's transient + the other's kept prompts
        assertEquals(transientOfOne + Double.parseDouble(k), Double.parseDouble(gen.group(3)), 0.011, r.out());
        assertEquals(Double.parseDouble(gen.group(2)) + Double.parseDouble(gen.group(3)), Double.parseDouble(gen.group(1)), 0.011, r.out());
        assertTrue(r.out().contains("generation transient: " + own.group(1) + " GiB of solver_model's own, plus " + k + " GiB held for the"
                + " other models: the prompts\n    they keep for reuse (rollout.prefix_cache) stay cached through the phase"
                + " (verifier_model " + k + " GiB)"), r.out());
    }

    /** Every "key: value" line of the advice, as overrides. */
    static List<String> adviceOverrides(String out) {
        List<String> o = new ArrayList<>();
        Matcher m = Pattern.compile("(?m)^  ([a-z_.]+): (\\S+) \\(").matcher(out);
        while (m.find()) o.add(m.group(1) + "=" + m.group(2));
        return o;
    }

    @Test
    void adviceThatIsFollowedMakesItFit() {
        // the shipped settings off: unsharded optimiser, no checkpointing, no token bounds
        List<String> base = List.of("plan", MATH, QWEN3, "--gpus", "8", "--gpu-memory", "80", "distributed.shard_optimizer=false",
                "models.policy.activation_checkpointing=false", "rollout.max_batch_tokens=0", "ppo.max_tokens_per_micro_batch=0");
        Cli.Run r = Cli.run(base.toArray(String[]::new));
        assertEquals(PlanCommand.DOES_NOT_FIT, r.exit(), r.out() + r.err());
        assertTrue(r.out().contains("fits: no"), r.out());
        List<String> advice = adviceOverrides(r.out());
        assertTrue(advice.contains("distributed.shard_optimizer=true"), r.out());
        assertTrue(advice.contains("models.policy.activation_checkpointing=true"), r.out());
        // (no rollout bound: once the optimiser is sharded, 32 rows of a turn decode within the GPU)
        assertTrue(advice.stream().anyMatch(a -> a.startsWith("ppo.max_tokens_per_micro_batch=")), r.out());
        assertTrue(r.out().contains("with all of these it fits"), r.out());
        assertTrue(advice.contains("ppo.fused_lm_head=true") && r.out().contains("has not run on a GPU yet"), r.out());
        List<String> fixed = new ArrayList<>(base);
        fixed.addAll(advice);
        Cli.Run again = Cli.run(fixed.toArray(String[]::new));
        assertEquals(0, again.exit(), again.out());
    }

    @Test
    void theAdviceSwitchesTheFusedHeadOnForCpuAndGpuRuns() {
        List<String> base = List.of("plan", MATH, QWEN3, "--gpus", "8", "--gpu-memory", "80", "run.device=cpu",
                "distributed.shard_optimizer=false", "models.policy.activation_checkpointing=false", "rollout.max_batch_tokens=0",
                "ppo.max_tokens_per_micro_batch=0");
        Cli.Run r = Cli.run(base.toArray(String[]::new));
        assertEquals(PlanCommand.DOES_NOT_FIT, r.exit(), r.out() + r.err());
        List<String> advice = adviceOverrides(r.out());
        assertTrue(advice.contains("ppo.fused_lm_head=true"), r.out());
        assertTrue(r.out().contains("with all of these it fits"), r.out());
        List<String> fixed = new ArrayList<>(base);
        fixed.addAll(advice);
        Cli.Run again = Cli.run(fixed.toArray(String[]::new));
        assertEquals(0, again.exit(), again.out());
        assertTrue(again.out().contains("with the LM head (ppo.fused_lm_head: true)"), again.out());
        assertTrue(!r.out().contains("has not run on a GPU yet"), r.out());
        // a GPU run gets the same changes, the fused head's marked as not yet run on a GPU
        Cli.Run gpu = Cli.run(gpuRun(base));
        assertEquals(advice, adviceOverrides(gpu.out()), gpu.out());
        assertTrue(gpu.out().contains("has not run on a GPU yet"), gpu.out());
        assertTrue(tokens(advice) > 0, r.out());
    }

    static String[] gpuRun(List<String> cpuBase) {
        return cpuBase.stream().map(a -> a.equals("run.device=cpu") ? "run.device=cuda" : a).toArray(String[]::new);
    }

    static long tokens(List<String> advice) {
        return advice.stream().filter(a -> a.startsWith("ppo.max_tokens_per_micro_batch=")).mapToLong(a -> Long.parseLong(a.split("=")[1]))
                .findFirst().orElseThrow();
    }

    @Test
    void aModelFolderWithoutConfigJsonIsNamed() {
        Cli.Run r = Cli.run("plan", MATH, "models.policy.path=" + tmp);
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("models.policy.path") && r.err().contains("configs/shapes"), r.err());
    }

    @Test
    void rowsLongerThanTheModelsPositionsAreRefusedAsTheRunRefusesThem() {
        // the run refuses them when it loads the model (RunConfig.checkRowFits); the plan reads the same config.json
        // (the config's token budgets off, so that the loader's own checks of them let these rows through)
        String[] off = {"rollout.max_batch_tokens=0", "ppo.max_tokens_per_micro_batch=0"};
        Cli.Run r = Cli.run("plan", MATH, QWEN3, off[0], off[1], "rollout.max_prompt_tokens=1024", "rollout.max_new_tokens=40000");
        assertEquals(1, r.exit(), r.out() + r.err());
        assertTrue(r.err().contains("rollout.max_new_tokens") && r.err().contains("1024 + 40000 = 41024")
                && r.err().contains("40960 (max_position_embeddings in ") && r.err().contains("qwen3-4b"), r.err());
        assertEquals("", r.out());
        // rows of exactly the model's positions are planned (whether they fit one GPU is the plan's answer, 0 or 2)
        Cli.Run edge = Cli.run("plan", MATH, QWEN3, off[0], off[1], "rollout.max_prompt_tokens=1024", "rollout.max_new_tokens=39936");
        assertNotEquals(1, edge.exit(), edge.out() + edge.err());
        assertTrue(edge.out().startsWith("drmas plan: "), edge.out() + edge.err());
    }

    @Test
    void aBadOptionIsBadInputNotDoesNotFit() {
        Cli.Run r = Cli.run("plan", MATH, QWEN3, "--gpus", "eight");
        assertEquals(1, r.exit(), r.out() + r.err());
        assertTrue(r.err().contains("--gpus") && r.err().contains("eight"), r.err());
    }

    @Test
    void anAgentThatTheWorkflowsOptionsLeaveWithoutATurnIsWarnedAsTrainWarns() {
        String[] nonShared = {"plan", "../configs/math-qwen3-4b-nonshared.yaml", "models.solver.path=../configs/shapes/qwen3-4b",
                "models.verifier.path=../configs/shapes/qwen3-4b", "--gpus", "8", "--gpu-memory", "80"};
        Cli.Run shipped = Cli.run(nonShared);
        assertEquals(0, shipped.exit(), shipped.out() + shipped.err());
        assertTrue(!shipped.out().contains("warning:"), shipped.out());
        List<String> one = new ArrayList<>(List.of(nonShared));
        one.add("orchestra.options.max_loops=1");
        Cli.Run r = Cli.run(one.toArray(String[]::new));
        assertEquals(0, r.exit(), r.out() + r.err());
        assertTrue(r.out().contains("warning: agent 'verifier' (role verifier, model verifier) never acts and gets no training rows: the "
                + "math workflow calls the verifier only after a solver turn before the last round, which needs "
                + "orchestra.options.max_loops >= 2 (it is 1)\n"), r.out());
        assertTrue(r.out().contains("warning: model 'verifier' (agents verifier) never trains"), r.out());
        // search: the searcher is never asked in the last turn; its model is shared with the agents that act
        Cli.Run search = Cli.run("plan", "../configs/search-qwen2.5-7b.yaml", "models.policy.path=../configs/shapes/qwen2.5-7b",
                "orchestra.options.max_turns=1");
        assertTrue(search.out().contains("warning: agent 'searcher' (role searcher, model policy) never acts and gets no training rows: "
                + "the search workflow calls the searcher only after a verifier's no in a turn before the last, which needs "
                + "orchestra.options.max_turns >= 2 (it is 1)"), search.out() + search.err());
        assertTrue(!search.out().contains("never trains"), search.out());
    }

    @Test
    void aTinyCpuConfigFitsOneSmallGpu() {
        Cli.Run r = Cli.run("plan", "../configs/math-toy-drmas.yaml", "--gpu-memory", "2");
        assertEquals(0, r.exit(), r.out() + r.err());
        assertTrue(r.out().contains("vocab 366"), r.out());
    }
}
