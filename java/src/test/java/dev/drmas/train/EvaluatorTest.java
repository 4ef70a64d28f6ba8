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
    @Test
    void ranksTakeTasksInTurnAChunkAtATimeAndEverySampleKeepsItsStream() {
        // a test file of benchmarks one after another: each of 3 ranks gets some of every part of it
        assertEquals(List.of(List.of(1, 4), List.of(7)), Evaluator.chunks(8, 1, 3, 2));
        assertEquals(List.of(List.of(2, 5), List.of()), Evaluator.chunks(8, 2, 3, 2), "as many chunks as rank 0, the last empty");
        assertEquals(List.of(List.of()), Evaluator.chunks(2, 2, 3, 1), "a rank without tasks pairs its collective too");
        for (int tasks : new int[] {1, 7, 12, 13}) {
            for (int w = 1; w <= 4; w++) {
                for (int per : new int[] {1, 2, 5, 100}) {
                    int n = 3;
                    java.util.Set<Long> keys = new java.util.TreeSet<>();
                    int chunks = Evaluator.chunks(tasks, 0, w, per).size();
                    for (int r = 0; r < w; r++) {
                        List<List<Integer>> plan = Evaluator.chunks(tasks, r, w, per);
                        assertEquals(chunks, plan.size(), "rank " + r);
                        for (int c = 0; c < plan.size(); c++) {
                            var key = Evaluator.globalTrajectory(plan.get(c), n);
                            for (int t = 0; t < plan.get(c).size() * n; t++) {
                                int task = plan.get(c).get(t / n);
                                assertTrue(task >= c * per * w && task < (c + 1) * per * w, "chunk " + c + " of all ranks is one range");
                                assertEquals((long) task * n + t % n, key.applyAsLong(t));
                                keys.add(key.applyAsLong(t));
                            }
                        }
                    }
                    // every sample of every task once: the draws are those of one process, whatever w and the chunk size
                    assertEquals(tasks * n, keys.size(), tasks + " tasks, " + w + " ranks, chunks of " + per);
                    assertEquals((long) tasks * n - 1, ((java.util.TreeSet<Long>) keys).last());
                }
            }
        }
    }
}
