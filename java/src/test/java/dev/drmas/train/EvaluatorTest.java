// EvaluatorTest.java — the parts of held-out evaluation that need no model: a reward that is not
// finite is an error naming the task (it counted as a miss), and the progress wrapper hands a round
// of several agents to the policy as one actTogether call (it split it into one act per agent, so
// agents sharing a model were generated in separate engine batches). The workload and policy are
// stand-ins: RolloutBatchTest's reward table, and a policy that counts its calls.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.PromptTemplate;
import dev.drmas.agent.Turn;
import dev.drmas.agent.TurnRequest;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class EvaluatorTest {
    @Test
    void aRewardThatIsNotFiniteIsAnErrorNamingTheTask() {
        List<Episode> eps = RolloutBatchTest.episodes();
        var w = new RolloutBatchTest.TableWorkload(new double[] {1, 0, Double.NaN, 0.5});
        assertTrue(Evaluator.solved(w, RolloutBatchTest.TASKS.get(0), eps.get(0)));
        assertFalse(Evaluator.solved(w, RolloutBatchTest.TASKS.get(0), eps.get(1)));
        assertFalse(Evaluator.solved(w, RolloutBatchTest.TASKS.get(1), eps.get(3)), "0.5 is not solved");
        var e = assertThrows(IllegalStateException.class, () -> Evaluator.solved(w, RolloutBatchTest.TASKS.get(1), eps.get(2)));
        assertEquals("the evaluation reward of task 'gsm8k-42' (trajectory 2) is NaN: a reward must be finite", e.getMessage());
    }

    static Agent agent(String id, int index) {
        return new Agent(id, index, "m", "", PromptTemplate.of("Q: {question}"), null, null);
    }

    static List<TurnRequest> requests(int count) {
        List<TurnRequest> r = new ArrayList<>();
        for (int i = 0; i < count; i++) r.add(new TurnRequest(i, i, 0, 0, 0, List.of()));
        return r;
    }

    /** Answers "ok" to everything and records its calls: "act a" or "together a+b". */
    static final class CountingPolicy implements AgentPolicy {
        final List<String> calls = new ArrayList<>();

        @Override
        public List<Turn> act(Agent agent, List<TurnRequest> requests) {
            calls.add("act " + agent.id());
            return requests.stream().map(r -> Turn.of("ok")).toList();
        }

        @Override
        public List<List<Turn>> actTogether(List<Agent> agents, List<List<TurnRequest>> requests) {
            calls.add("together " + String.join("+", agents.stream().map(Agent::id).toList()));
            return requests.stream().map(rs -> rs.stream().map(r -> Turn.of("ok")).toList()).toList();
        }
    }

    @Test
    void progressPassesRoundsOfSeveralAgentsOnAsOneCall() {
        CountingPolicy inner = new CountingPolicy();
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        AgentPolicy watched = new Evaluator.Progress(inner, 4, 0, System.nanoTime(), new PrintStream(log, true, StandardCharsets.UTF_8));
        List<List<Turn>> turns = watched.actTogether(List.of(agent("searcher", 1), agent("answerer", 2)), List.of(requests(1), requests(2)));
        assertEquals(List.of(1, 2), turns.stream().map(List::size).toList());
        watched.act(agent("verifier", 0), requests(3));
        assertEquals(List.of("together searcher+answerer", "act verifier"), inner.calls);
        String text = log.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("eval: round 1 done (searcher+answerer, 3 of 4 episodes still running)"), text);
        assertTrue(text.contains("eval: round 2 done (verifier, 3 of 4 episodes still running)"), text);
    }
}
