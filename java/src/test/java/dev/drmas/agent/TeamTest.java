// TeamTest.java — team queries for shared, non-shared and heterogeneous mappings, the checks on
// agent ids and indices, and the merge of optimiser settings per model with its conflict error.
package dev.drmas.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class TeamTest {
    static final Agent S = Agent.solver(0, "qwen"), V = Agent.verifier(1, "qwen");

    static String error(Runnable r) {
        return assertThrows(IllegalArgumentException.class, r::run).getMessage();
    }

    @Test
    void sharedTeamHasOneModelForBothAgents() {
        Team t = new Team(List.of(V, S));  // any order; indices decide
        assertEquals(List.of(S, V), t.agents());
        assertEquals(List.of("qwen"), t.models());
        assertEquals(List.of(S, V), t.agentsOf("qwen"));
        assertTrue(t.isShared("qwen"));
        assertEquals("qwen", t.modelOf("verifier"));
        assertEquals(V, t.agent(1));
    }

    @Test
    void nonSharedAndHeterogeneousTeamsHaveAModelPerAgent() {
        Team t = new Team(List.of(Agent.solver(0, "qwen3-4b"), Agent.verifier(1, "llama-1b")));
        assertEquals(List.of("qwen3-4b", "llama-1b"), t.models());
        assertFalse(t.isShared("qwen3-4b"));
        assertFalse(t.isShared("llama-1b"));
        assertEquals(List.of("verifier"), t.agentsOf("llama-1b").stream().map(Agent::id).toList());
        assertTrue(error(() -> t.agentsOf("gpt")).contains("no agent uses model 'gpt'; models: qwen3-4b, llama-1b"));
        assertTrue(error(() -> t.modelOf("critic")).contains("no agent 'critic' in the team; agents: solver, verifier"));
    }

    @Test
    void agentIdsAndIndicesAreChecked() {
        assertTrue(error(() -> new Team(List.of(S, S.withIndex(1)))).contains("two agents are named 'solver'"));
        assertTrue(error(() -> new Team(List.of(S, V.withIndex(0)))).contains("agents 'solver' and 'verifier' both have index 0"));
        assertTrue(error(() -> new Team(List.of(S, V.withIndex(2)))).contains("agent 'verifier': index 2 is out of range"));
        assertTrue(error(() -> new Team(List.of())).contains("at least one agent"));
        assertTrue(error(() -> S.withModel(" ")).contains("agent 'solver': model id must not be blank"));
    }

    @Test
    void optimiserSettingsMergeDefaultsModelAndAgents() {
        OptimSettings defaults = new OptimSettings(1e-6, 0.9, 0.999, 0.01, 0, 1.0);
        Team t = new Team(List.of(Agent.solver(0, "a"), Agent.verifier(1, "b")), defaults,
                Map.of("a", new OptimOverrides(2e-6, null, 0.95, null, 10, null)),
                Map.of("solver", OptimOverrides.lr(3e-6), "verifier", new OptimOverrides(null, null, null, 0.0, null, 0.5)));
        assertEquals(Map.of("a", new OptimSettings(3e-6, 0.9, 0.95, 0.01, 10, 1.0),
                        "b", new OptimSettings(1e-6, 0.9, 0.999, 0.0, 0, 0.5)), t.resolveOptim());
        assertEquals(List.of("a", "b"), List.copyOf(t.resolveOptim().keySet()));

        assertEquals(Map.of("qwen", OptimSettings.DEFAULTS), new Team(List.of(S, V)).resolveOptim());
    }

    @Test
    void agentsSharingAModelMayAgreeOrLeaveAKeyToTheOther() {
        Team agree = new Team(List.of(S, V), OptimSettings.DEFAULTS, Map.of(),
                Map.of("solver", OptimOverrides.lr(1e-5), "verifier", new OptimOverrides(1e-5, null, null, null, 5, null)));
        OptimSettings q = agree.resolveOptim().get("qwen");
        assertEquals(1e-5, q.lr());
        assertEquals(5, q.warmupSteps(), "a key only one agent sets applies to the shared optimiser");
    }

    @Test
    void agentsSharingAModelMustNotDisagree() {
        String msg = error(() -> new Team(List.of(S, V), OptimSettings.DEFAULTS, Map.of(),
                Map.of("solver", OptimOverrides.lr(1e-5), "verifier", OptimOverrides.lr(2e-5))));
        assertTrue(msg.contains("agents 'solver' and 'verifier' share model 'qwen'"), msg);
        assertTrue(msg.contains("optim.lr differently (1.0E-5 vs 2.0E-5)"), msg);

        // the same values on different models are no conflict
        new Team(List.of(S, V.withModel("other")), OptimSettings.DEFAULTS, Map.of(),
                Map.of("solver", OptimOverrides.lr(1e-5), "verifier", OptimOverrides.lr(2e-5)));
    }

    @Test
    void badOptimiserSettingsNameTheModelAndKey() {
        String msg = error(() -> new Team(List.of(S, V), OptimSettings.DEFAULTS,
                Map.of("qwen", new OptimOverrides(null, 1.0, null, null, null, null)), Map.of()));
        assertTrue(msg.contains("model 'qwen': optim.beta1 = 1.0 must be in [0, 1)"), msg);

        msg = error(() -> new Team(List.of(S, V), OptimSettings.DEFAULTS, Map.of(),
                Map.of("verifier", new OptimOverrides(-1.0, null, null, null, null, null))));
        assertTrue(msg.contains("model 'qwen' with overrides of agents ['verifier']: optim.lr = -1.0 must be finite and > 0"), msg);

        msg = error(() -> new Team(List.of(S, V), OptimSettings.DEFAULTS, Map.of("llama", OptimOverrides.lr(1)), Map.of()));
        assertTrue(msg.contains("model 'llama', which no agent uses; models: qwen"), msg);

        msg = error(() -> new Team(List.of(S, V), OptimSettings.DEFAULTS, Map.of(), Map.of("critic", OptimOverrides.lr(1))));
        assertTrue(msg.contains("agent 'critic', which is not in the team; agents: solver, verifier"), msg);

        assertTrue(error(() -> new OptimSettings(1e-6, 0.9, 0.999, 0.0, -1, 1.0)).contains("optim.warmup_steps = -1"));
        assertTrue(error(() -> new OptimSettings(1e-6, 0.9, 0.999, 0.0, 0, 0.0)).contains("optim.grad_clip = 0.0"));
        assertEquals(Double.POSITIVE_INFINITY,
                new OptimSettings(1e-6, 0.9, 0.999, 0.0, 0, Double.POSITIVE_INFINITY).gradClip());
    }
}
