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
    static final Agent S = agent("solver", 0, "qwen"), V = agent("verifier", 1, "qwen");

    static Agent agent(String id, int index, String model) {
        return new Agent(id, index, model, "", PromptTemplate.of("Q: {question}"), null, null);
    }

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
        Team t = new Team(List.of(agent("solver", 0, "qwen3-4b"), agent("verifier", 1, "llama-1b")));
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
}
