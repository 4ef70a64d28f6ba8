// ProposerOrchestraTest.java — the fan-out state machine with scripted policies: P proposer calls
// (round-robin over several proposer agents) then one aggregator call that sees every proposal, the
// rows each agent gets per trajectory, validity, the reward of the aggregator's answer, the
// workload's metrics and its demonstrations, and the team checks.
package dev.drmas.workflow.proposer;

import static dev.drmas.testing.ScriptedPolicy.boxed;
import static dev.drmas.testing.ScriptedPolicy.user;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Step;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
import dev.drmas.testing.ScriptedPolicy;
import dev.drmas.workflow.Workflows;
import dev.drmas.workflow.Workload;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class ProposerOrchestraTest {
    static Workload workload(String... overrides) {
        RunConfig cfg = RunConfig.load(Path.of("..", "configs", "math-toy-proposer-aggregator.yaml"), List.of(overrides));
        return Workflows.open(cfg, new PrintStream(new ByteArrayOutputStream()));
    }

    static final Task T = new Task("t", "12+30=?", "42");
    static final EpisodeInit Q42 = new EpisodeInit(0, 0, T.question(), T.answer());

    @Test
    void proposalsThenOneAggregatedAnswer() {
        try (Workload w = workload()) {
            // proposals: right, wrong, no box; the aggregator copies the first proposal's box
            ScriptedPolicy policy = new ScriptedPolicy((agent, r) -> switch (r.turn()) {
                case 0 -> boxed(42);
                case 1 -> boxed(41);
                case 2 -> "forty-two";
                default -> user(r).lines().filter(l -> l.startsWith("P1: ")).findFirst().orElseThrow().substring(4);
            });
            Episode e = w.orchestra().run(List.of(Q42), policy).getFirst();
            assertEquals(List.of("proposer", "proposer", "proposer", "aggregator"), policy.calls.stream().map(ScriptedPolicy.Call::agent).toList());
            assertEquals(List.of(0, 0, 0, 1), e.steps().stream().map(Step::agent).toList(), "three proposer rows, one aggregator row");
            assertEquals(List.of(0, 1, 2, 3), e.steps().stream().map(Step::loop).toList());
            String agg = e.steps().get(3).prompt().getLast().content();
            assertEquals("Q: 12+30=?\nP1: " + boxed(42) + "\nP2: " + boxed(41) + "\nP3: forty-two", agg);
            assertEquals(List.of(true, true, false, true), e.steps().stream().map(Step::valid).toList());
            assertEquals(boxed(42), e.action());
            assertEquals(1.0, w.reward(T, e));
            assertEquals(0.9, w.rowScore(1.0, e.steps().get(2)), 1e-15, "a proposal without a box is penalised");

            Map<String, Double> m = w.episodeSums(List.of(T), List.of(e));
            assertEquals(1.0 / 3, m.get("proposer/correct_rate"), 1e-15);
            assertEquals(0.0, m.get("proposer/agreement"));
            assertEquals(1.0, m.get("aggregator/follows_majority"), "42 and 41 have one vote each: the earliest wins");
            assertEquals(4, w.maxTurnsPerEpisode());
        }
    }

    @Test
    void proposalsThatAllBoxTheSameAnswerAgree() {
        try (Workload w = workload()) {
            ScriptedPolicy policy = new ScriptedPolicy((agent, r) -> boxed(42));
            List<Episode> eps = w.orchestra().run(List.of(Q42, new EpisodeInit(1, 1, T.question(), T.answer())), policy);
            Map<String, Double> one = w.episodeSums(List.of(T), List.of(eps.getFirst()));
            assertEquals(1.0, one.get("proposer/agreement"), "three proposals of 42");
            assertEquals(1.0, one.get("proposer/correct_rate"), 1e-15);
            assertEquals(1.0, one.get("aggregator/follows_majority"));
            assertEquals(2.0, w.episodeSums(List.of(T, T), eps).get("proposer/agreement"), "summed over episodes");
        }
    }

    @Test
    void severalProposerAgentsTakeTurns() {
        try (Workload w = workload("+agents[2]={id: second, role: proposer, model: policy}", "orchestra.options.proposers=5")) {
            ScriptedPolicy policy = new ScriptedPolicy((agent, r) -> agent.id().equals("aggregator") ? boxed(7) : boxed(r.turn()));
            List<Episode> eps = w.orchestra().run(List.of(Q42, new EpisodeInit(1, 1, "3+4=?", "7")), policy);
            assertEquals(List.of("proposer", "second", "proposer", "second", "proposer", "aggregator"),
                    policy.calls.stream().map(ScriptedPolicy.Call::agent).toList(), "proposal i by proposer i mod 2, batched over episodes");
            assertEquals(List.of(0, 1), policy.calls.getFirst().episodes());
            // agents act a different number of times per trajectory: 3, 2 and 1
            Episode e = eps.get(1);
            assertEquals(List.of(3, 1, 2), List.of(e.stepsOf(0).size(), e.stepsOf(1).size(), e.stepsOf(2).size()));
            assertEquals(1.0, w.reward(new Task("u", "3+4=?", "7"), e));
        }
        var ex = assertThrows(IllegalArgumentException.class, () -> workload("+agents[2]={id: second, role: proposer, model: policy}",
                "orchestra.options.proposers=1").close());
        assertTrue(ex.getMessage().contains("agents[2].role: 'proposer' is also the role of agents[0]"), ex.getMessage());
        ex = assertThrows(IllegalArgumentException.class, () -> workload("agents[1].role=proposer").close());
        assertTrue(ex.getMessage().contains("needs an agent with role aggregator"), ex.getMessage());
    }

    @Test
    void demonstrationsAggregateTheMajority() {
        try (Workload w = workload()) {
            List<Task> tasks = List.of(T, new Task("u", "3+4=?", "7"), new Task("v", "9-2=?", "7"));
            List<EpisodeInit> init = List.of(Q42, new EpisodeInit(1, 1, "3+4=?", "7"), new EpisodeInit(2, 2, "9-2=?", "7"));
            for (double p : new double[] {1.0, 0.0}) {
                List<Episode> eps = w.orchestra().run(init, w.demonstrator(tasks, p, new SplittableRandom(3)));
                for (Episode e : eps) {
                    assertTrue(e.steps().stream().allMatch(Step::valid), "demonstrations follow the formats");
                    assertEquals(ProposerWorkload.majority(e.steps().subList(0, 3).stream().map(Step::text).toList()).orElseThrow(),
                            dev.drmas.workflow.math.MathAnswers.lastBoxed(e.action()).orElseThrow());
                    assertEquals(p, w.reward(tasks.get(e.uid()), e), "right proposals give a right majority, wrong ones a wrong one");
                }
            }
        }
        assertFalse(ProposerWorkload.majority(List.of("no", "box")).isPresent());
        assertEquals("3", ProposerWorkload.majority(List.of(boxed(2), boxed(3), "x", boxed(3))).orElseThrow());
    }
    @Test
    void aProposersFollowUpTemplateServesItsLaterCalls() {
        // agents[i].prompts.follow_up: a proposer called more than once in an episode (3 calls, one proposer agent)
        try (Workload w = workload("+agents[0].prompts={user: 'First try: {question}', follow_up: 'Once more: {question}'}")) {
            ScriptedPolicy policy = new ScriptedPolicy((agent, r) -> boxed(42));
            Episode e = w.orchestra().run(List.of(Q42), policy).getFirst();
            assertEquals(List.of("First try: 12+30=?", "Once more: 12+30=?", "Once more: 12+30=?"),
                    e.steps().subList(0, 3).stream().map(s -> s.prompt().getLast().content()).toList());
        }
    }
}
