// EnginePolicyTest.java — the trainer's policy over real tiny models on the search workflow: a round
// in which the answerer and the searcher both act goes to the rollout engine as one generate call
// when they share a model (one per model otherwise), with the same tokens, log-probs and episodes
// as one call per agent; and the prompts of a phase's earlier turns are reused by its later ones.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.Step;
import dev.drmas.agent.Turn;
import dev.drmas.agent.TurnRequest;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
import dev.drmas.workflow.Workflows;
import dev.drmas.workflow.Workload;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class EnginePolicyTest {
    @TempDir
    Path tmp;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    /**
     * The verifier is scripted (yes for even trajectories, no for odd ones, so that each round has
     * answerers and searchers); the searcher's and the answerer's turns come from {@code engine}.
     */
    record Mixed(EnginePolicy engine, boolean together) implements AgentPolicy {
        @Override
        public List<Turn> act(Agent agent, List<TurnRequest> requests) {
            if (agent.id().equals("verifier")) {
                return requests.stream().map(r -> Turn.of("<verify>" + (r.traj() % 2 == 0 ? "yes" : "no") + "</verify>")).toList();
            }
            return engine.act(agent, requests);
        }

        @Override
        public List<List<Turn>> actTogether(List<Agent> agents, List<List<TurnRequest>> requests) {
            return together ? engine.actTogether(agents, requests) : AgentPolicy.super.actTogether(agents, requests);
        }
    }

    record Run(List<Episode> episodes, int calls, long[] prefill) {
    }

    private Run run(String config, boolean together, boolean keepPrefixes) {
        RunConfig cfg = RunConfig.load(Path.of("../configs/" + config + ".yaml"), List.of("run.output_dir=" + tmp,
                "rollout.prefix_cache=" + keepPrefixes, "orchestra.options.max_turns=3"));
        PrintStream quiet = new PrintStream(new ByteArrayOutputStream());
        try (Workload w = Workflows.open(cfg, quiet); Policies ps = Policies.open(cfg, tmp.resolve(config + together), null, null)) {
            EnginePolicy engine = new EnginePolicy(ps, cfg.rollout().sampling(), cfg.rollout().maxPromptTokens(), cfg.rollout().truncation(),
                    cfg.rollout().maxNewTokens(), SamplingStreams.training(0), 5, t -> t);
            List<Task> tasks = w.train().subList(0, 4);
            List<Episode> eps = RolloutBatch.run(w.orchestra(), tasks, 4, new Mixed(engine, together));
            return new Run(eps, engine.calls(), engine.prefill());
        }
    }

    private static void assertSameEpisodes(List<Episode> want, List<Episode> got) {
        assertEquals(want.size(), got.size());
        for (int e = 0; e < want.size(); e++) {
            List<Step> a = want.get(e).steps(), b = got.get(e).steps();
            assertEquals(a.size(), b.size(), "episode " + e);
            for (int s = 0; s < a.size(); s++) {
                assertEquals(a.get(s).agent(), b.get(s).agent(), "episode " + e + " step " + s);
                assertEquals(a.get(s).output().text(), b.get(s).output().text(), "episode " + e + " step " + s);
                if (a.get(s).output().payload() instanceof TurnData x) {
                    TurnData y = (TurnData) b.get(s).output().payload();
                    assertArrayEquals(x.promptIds(), y.promptIds(), "episode " + e + " step " + s);
                    assertArrayEquals(x.responseIds(), y.responseIds(), "episode " + e + " step " + s);
                    assertArrayEquals(x.logprobs(), y.logprobs(), 1e-4f, "episode " + e + " step " + s);
                }
            }
            assertEquals(want.get(e).action(), got.get(e).action(), "episode " + e);
        }
    }

    @Test
    void agentsSharingAModelActInOneGenerateCall() {
        Run apart = run("search-toy-drmas-shared", false, false), together = run("search-toy-drmas-shared", true, false);
        assertSameEpisodes(apart.episodes(), together.episodes());
        long searched = together.episodes().stream().filter(e -> e.steps().stream().anyMatch(s -> s.agent() == 1)).count();
        assertTrue(searched > 0 && searched < together.episodes().size(), searched + " episodes searched");
        // per round: one call for the searcher and the answerer together instead of two (the scripted verifier makes none)
        assertTrue(together.calls() < apart.calls(), together.calls() + " calls together, " + apart.calls() + " apart");
        assertEquals(apart.prefill()[0], together.prefill()[0], "the same prompt tokens");
    }

    @Test
    void agentsOnTheirOwnModelsStillActOneCallEach() {
        Run apart = run("search-toy-drmas", false, false), together = run("search-toy-drmas", true, false);
        assertSameEpisodes(apart.episodes(), together.episodes());
        assertEquals(apart.calls(), together.calls());
    }

    @Test
    void laterTurnsReuseTheEarlierPrompts() {
        Run fresh = run("search-toy-drmas-shared", true, false), kept = run("search-toy-drmas-shared", true, true);
        assertSameEpisodes(fresh.episodes(), kept.episodes());
        assertEquals(fresh.prefill()[0], kept.prefill()[0], "the same prompt tokens");
        // fewer prompt tokens computed: the later turns copy their earlier prompts (the question, the first searches)
        assertTrue(kept.prefill()[1] < fresh.prefill()[1] * 3 / 4 && kept.prefill()[2] > 0,
                "kept prompts: " + java.util.Arrays.toString(kept.prefill()) + ", fresh: " + java.util.Arrays.toString(fresh.prefill()));
    }
}
