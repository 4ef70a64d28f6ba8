// SearchCommandsTest.java — the search workload through the `drmas` command: `sft` then a few steps
// of `train` on configs/search-toy-drmas.yaml with tiny overrides (real LibTorch models, real Lucene
// BM25 over the built-in knowledge base; the warm start's demonstrations search through it), with
// metrics written and finite; `index` builds an index a run can open and names bad corpus lines;
// the shipped search configs load.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.config.RunConfig;
import dev.drmas.workflow.search.Bm25Retriever;
import dev.drmas.workflow.search.CorpusFile;
import dev.drmas.workflow.search.KnowledgeBase;
import dev.drmas.workflow.search.RetrieverOptions;
import dev.drmas.workflow.search.SearchOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SearchCommandsTest {
    @TempDir
    Path dir;

    static final Path TOY = Path.of("..", "configs", "search-toy-drmas.yaml");

    List<String> tiny() {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + dir, "run.name=search-e2e",
                "data.synthetic.people=12", "data.synthetic.test_size=4",
                "rollout.tasks_per_step=2", "rollout.rollouts_per_task=2", "rollout.max_new_tokens=8",
                // a random tiny verifier writes no tag: counting that as "no" makes the searcher act too
                "orchestra.options.malformed_verdict=reject", "orchestra.options.max_turns=2",
                "ppo.mini_batch_size=8", "ppo.micro_batch_size=8", "trainer.steps=2", "trainer.eval_freq=2", "trainer.eval_before_train=false",
                "trainer.save_freq=0", "eval.tasks=2", "eval.k=2", "sft.steps=2", "sft.batch_size=4",
                "metrics.progress_bar=false", "metrics.tensorboard=false"));
        for (String m : List.of("verifier_model", "searcher_model", "answerer_model")) {
            o.addAll(List.of("models." + m + ".size.hidden=32", "models." + m + ".size.intermediate=64",
                    "models." + m + ".size.layers=1", "models." + m + ".size.kv_heads=1", "models." + m + ".size.heads=2"));
        }
        return o;
    }

    Cli.Run run(String command, List<String> overrides) {
        List<String> args = new ArrayList<>(List.of(command, TOY.toString()));
        args.addAll(overrides);
        return Cli.run(args.toArray(String[]::new));
    }

    @Test
    void warmStartThenTrainAFewStepsWritesFiniteMetrics() throws Exception {
        Cli.Run sft = run("sft", tiny());
        assertEquals(0, sft.exit(), sft.err());
        Path runDir = dir.resolve("search-e2e");
        for (String m : List.of("verifier_model", "searcher_model", "answerer_model")) {
            assertTrue(Files.isDirectory(runDir.resolve("sft/models/" + m)), "warm-start weights of " + m);
        }
        Cli.Run train = run("train", tiny());
        assertEquals(0, train.exit(), train.err());
        List<JsonNode> lines = new ArrayList<>();
        ObjectMapper json = new ObjectMapper();
        for (String l : Files.readAllLines(runDir.resolve("metrics.jsonl"))) lines.add(json.readTree(l));
        for (int step = 1; step <= 2; step++) {
            int s = step;
            JsonNode m = lines.stream().filter(l -> l.get("step").asInt() == s && l.has("reward/mean")).findFirst().orElseThrow();
            for (String key : List.of("reward/mean", "search/f1", "search/tool_calls", "search/failed_searches",
                    "search/answered_rate", "search/turns", "verifier/reject_rate", "agent/verifier/adv_mean",
                    "agent/verifier/valid_ratio", "agent/searcher/rows", "agent/searcher/adv_sq_mean",
                    "model/verifier_model/pg_loss", "model/searcher_model/grad_norm", "model/searcher_model/lr",
                    // (the answerer may have no rows yet: then no PPO statistics and no lr, as no step was taken)
                    "model/answerer_model/skipped_steps")) {
                assertTrue(m.has(key), "metric " + key + " in " + m);
                assertTrue(Double.isFinite(m.get(key).asDouble()), key + " = " + m.get(key));
            }
            assertEquals(0.0, m.get("search/failed_searches").asDouble(), "BM25 in-process does not fail");
        }
        JsonNode eval = lines.stream().filter(l -> l.has("eval/pass@1")).findFirst().orElseThrow();
        assertTrue(eval.has("eval/search/f1") && Double.isFinite(eval.get("eval/search/f1").asDouble()), eval.toString());
    }

    @Test
    void indexCommandBuildsAnIndexARunCanOpen() throws Exception {
        KnowledgeBase kb = KnowledgeBase.generate(new KnowledgeBase.Sizes(2, 4, 4, 8), 1);
        Path corpus = dir.resolve("corpus.jsonl"), index = dir.resolve("idx");
        CorpusFile.write(corpus, kb.passages());
        Cli.Run r = Cli.run("index", corpus.toString(), index.toString());
        assertEquals(0, r.exit(), r.err());
        try (Bm25Retriever b = Bm25Retriever.open(index)) {
            assertEquals(kb.passages().size(), b.size());
        }
        Files.writeString(corpus, "{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"b\"}\n");
        Cli.Run bad = Cli.run("index", corpus.toString(), dir.resolve("idx2").toString());
        assertEquals(1, bad.exit(), bad.err());
        assertTrue(bad.err().contains("corpus.jsonl:2") && bad.err().contains("'text'"), bad.err());
    }

    @Test
    void badSearchSettingsNameTheirKey() {
        Cli.Run r = run("train", List.of("run.output_dir=" + dir, "orchestra.options.retriever.type=http"));
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("orchestra.options.retriever.url") && r.err().contains("required"), r.err());
        r = run("train", List.of("run.output_dir=" + dir, "orchestra.options.retriever.top_kk=2"));
        assertTrue(r.err().contains("orchestra.options.retriever.top_k"), r.err());
        r = run("train", List.of("run.output_dir=" + dir, "orchestra.options.retriever.outage_s=-1"));
        assertTrue(r.err().contains("orchestra.options.retriever.outage_s: must be >= 0 (0: no retry), got -1"), r.err());
        r = run("train", List.of("run.output_dir=" + dir, "data.synthetic.test_size=100000"));
        assertTrue(r.err().contains("data.synthetic.test_size"), r.err());
        r = run("train", List.of("run.output_dir=" + dir, "orchestra.name=serch"));
        assertTrue(r.err().contains("unknown workflow 'serch'") && r.err().contains("search"), r.err());
    }

    @Test
    void shippedSearchConfigsLoad() {
        for (String name : List.of("search-toy-drmas.yaml", "search-toy-grpo.yaml", "search-toy-drmas-shared.yaml",
                "search-toy-drmas-heterogeneous.yaml", "search-qwen2.5-7b.yaml")) {
            RunConfig c = RunConfig.load(Path.of("..", "configs", name), List.of());
            assertEquals("search", c.orchestra().name(), name);
            assertEquals(3, c.agents().size(), name);
        }
        Path dirc = Path.of("..", "configs");
        assertEquals(1, RunConfig.load(dirc.resolve("search-toy-drmas-shared.yaml"), List.of()).usedModels().size());
        assertEquals(List.of("verifier_model", "small_searcher", "small_answerer"),
                RunConfig.load(dirc.resolve("search-toy-drmas-heterogeneous.yaml"), List.of()).usedModels());
        assertEquals(dev.drmas.algo.NormMode.GRPO, RunConfig.load(dirc.resolve("search-toy-grpo.yaml"), List.of()).algorithm().mode());
        RunConfig big = RunConfig.load(dirc.resolve("search-qwen2.5-7b.yaml"), List.of());
        assertEquals(RetrieverOptions.Type.HTTP, big.orchestra().options(SearchOptions.class).retriever().type());
        assertEquals("golden_answers", big.data().answerField());
        // the reference's examples/drmas_trainer/run_search.sh: five optimiser steps a training step
        // (ppo_mini_update_num=5), clip_ratio_high's default 0.2, entropy_coeff's default 0.001, 800 new tokens a
        // generation call (max_response_length); its validation during training, one sample of the first 30 tasks of
        // each of the seven benchmarks at temperature 0.6, top_p 0.95 (val_n=1 on test_sampled, val_kwargs)
        assertEquals(List.of(5, 0.2, 0.2, 0.001), List.of(big.ppo().updatesPerStep(), big.ppo().clipLow(), big.ppo().clipHigh(),
                big.ppo().entropyCoef()));
        assertEquals(800, big.rollout().maxNewTokens());
        // an (uid, agent) group of one row gets mean 0 and std 1, as the reference's compute_grpo_outcome_advantage
        assertEquals(dev.drmas.algo.SingletonPolicy.RAW, big.algorithm().singleton());
        // data.max_prompt_length=4096, truncation='left'; the base model, as model_ids
        assertEquals(List.of(4096, "LEFT"), List.of(big.rollout().maxPromptTokens(), big.rollout().truncation().name()));
        assertTrue(big.models().get("policy").path().toString().endsWith("Qwen2.5-7B"), big.models().get("policy").path().toString());
        assertEquals(List.of(210, 1, 1, 0.6, 0.95), List.of(big.eval().tasks(), big.eval().k(), big.eval().samplesPerTask(),
                big.eval().temperature(), big.eval().topP()));
        // the reference's general_projection: check_think_tag for its search and answer agents, Chinese invalid for all
        // three; an answerless answer does not end the episode (skyrl_gym/envs/search/env.py); the toy configs keep
        // the defaults
        SearchOptions o = big.orchestra().options(SearchOptions.class);
        assertEquals(List.of(true, true, true), List.of(o.requireThink(), o.rejectCjk(), o.retryUnanswered()));
        SearchOptions toy = RunConfig.load(dirc.resolve("search-toy-drmas.yaml"), List.of()).orchestra().options(SearchOptions.class);
        assertEquals(List.of(false, false, false), List.of(toy.requireThink(), toy.rejectCjk(), toy.retryUnanswered()));
    }
}
