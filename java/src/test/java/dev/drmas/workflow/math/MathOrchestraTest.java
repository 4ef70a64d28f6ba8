// MathOrchestraTest.java — the solver–verifier state machine with scripted policies: approve,
// reject and malformed paths, loop limits 1 to 3, batches whose episodes finish in different
// rounds, the prompts each turn sees, and the indices, counters and payloads recorded.
package dev.drmas.workflow.math;

import static dev.drmas.testing.ScriptedPolicy.boxed;
import static dev.drmas.testing.ScriptedPolicy.boxedAnswer;
import static dev.drmas.testing.ScriptedPolicy.truth;
import static dev.drmas.testing.ScriptedPolicy.user;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Message;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.agent.Turn;
import dev.drmas.agent.TurnRequest;
import dev.drmas.agent.Verdict;
import dev.drmas.testing.ScriptedPolicy;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;
import org.junit.jupiter.api.Test;

class MathOrchestraTest {
    static final int SOLVER = 0, VERIFIER = 1;
    static final Team TEAM = new Team(List.of(MathAgents.solver(SOLVER, "m"), MathAgents.verifier(VERIFIER, "m")));
    static final EpisodeInit Q42 = new EpisodeInit(7, 3, "12+30=?", "42");

    static MathOrchestra orchestra(int maxLoops, Verdict malformedAs) {
        return new MathOrchestra(TEAM, MathOrchestra.Options.DEFAULTS.withMaxLoops(maxLoops).withMalformedAs(malformedAs),
                MathReward::parseVerdict);
    }

    /** Solver: wrong (truth − 1) on the first try, right when it retries; verifier: checks the sum. */
    static final BiFunction<Agent, TurnRequest, String> HONEST = (agent, r) -> {
        String u = user(r);
        int t = truth(u);
        if (agent.id().equals(MathAgents.SOLVER)) return u.contains("Previous:") ? boxed(t) : boxed(t - 1);
        return boxedAnswer(u) == t ? "<verify>approve</verify>" : "<verify>reject</verify>";
    };

    @Test
    void approvePathIsSolverThenVerifier() {
        ScriptedPolicy policy = new ScriptedPolicy((agent, r) ->
                agent.id().equals(MathAgents.SOLVER) ? "so " + boxed(truth(user(r))) : "ok <verify>approve</verify>");
        Episode e = orchestra(2, Verdict.APPROVE).run(List.of(Q42), policy).getFirst();

        assertEquals(2, e.steps().size());
        assertEquals(List.of(SOLVER, VERIFIER), e.steps().stream().map(Step::agent).toList());
        assertEquals(List.of(0, 1), e.steps().stream().map(Step::turn).toList());
        assertEquals("Q: 12+30=?", e.steps().get(0).prompt().getLast().content());
        assertEquals("Q: 12+30=?\nA: so \\boxed{42}", e.steps().get(1).prompt().getLast().content());
        assertEquals("so \\boxed{42}", e.action());
        assertTrue(e.approved());
        assertEquals(List.of(1, 0, 0, 1), List.of(e.count(Episode.APPROVALS), e.count(Episode.REJECTIONS), e.count(Episode.MALFORMED_VERDICTS), e.count(Episode.ROUNDS)));
        assertEquals(List.of(7, 3, "12+30=?", "42"), List.of(e.uid(), e.traj(), e.question(), e.answer()));
        assertTrue(e.steps().stream().allMatch(Step::valid));
        // the system prompt is the first message, the role prompt of the agent
        assertEquals(Message.system(TEAM.agent(SOLVER).systemPrompt()), e.steps().get(0).prompt().getFirst());
    }

    @Test
    void rejectedAnswerGetsOneMoreSolverTurnThatSeesTheRejection() {
        ScriptedPolicy policy = new ScriptedPolicy(HONEST);
        Episode e = orchestra(2, Verdict.APPROVE).run(List.of(Q42), policy).getFirst();

        assertEquals(List.of(SOLVER, VERIFIER, SOLVER), e.steps().stream().map(Step::agent).toList());
        assertEquals(List.of(0, 1, 2), e.steps().stream().map(Step::turn).toList());
        assertEquals(List.of(0, 0, 1), e.steps().stream().map(Step::loop).toList());
        assertEquals("Q: 12+30=?\nA: \\boxed{41}", e.steps().get(1).prompt().getLast().content());
        assertEquals("Q: 12+30=?\nPrevious: \\boxed{41}\nVerifier: reject", e.steps().get(2).prompt().getLast().content());
        assertEquals("\\boxed{42}", e.action(), "the action is the latest answer, not the first");
        assertFalse(e.approved(), "the last round has no verifier, so nothing approved the retry");
        assertEquals(List.of(0, 1, 0, 2), List.of(e.count(Episode.APPROVALS), e.count(Episode.REJECTIONS), e.count(Episode.MALFORMED_VERDICTS), e.count(Episode.ROUNDS)));
        // the verifier is not asked in the last round
        assertEquals(List.of("solver", "verifier", "solver"), policy.calls.stream().map(ScriptedPolicy.Call::agent).toList());
    }

    static final BiFunction<Agent, TurnRequest, String> MUMBLING_VERIFIER = (agent, r) ->
            agent.id().equals(MathAgents.SOLVER) ? boxed(truth(user(r))) : "I think it is fine";

    @Test
    void malformedVerdictCountsAsApproveByDefault() {
        Episode e = orchestra(2, Verdict.APPROVE).run(List.of(Q42), new ScriptedPolicy(MUMBLING_VERIFIER)).getFirst();
        assertEquals(2, e.steps().size());
        assertTrue(e.approved());
        assertEquals(List.of(0, 0, 1), List.of(e.count(Episode.APPROVALS), e.count(Episode.REJECTIONS), e.count(Episode.MALFORMED_VERDICTS)));
        assertFalse(e.steps().get(1).valid(), "a reply without a verdict tag is an invalid action");
    }

    @Test
    void malformedVerdictCanCountAsReject() {
        Episode e = orchestra(2, Verdict.REJECT).run(List.of(Q42), new ScriptedPolicy(MUMBLING_VERIFIER)).getFirst();
        assertEquals(3, e.steps().size());
        assertFalse(e.approved());
        assertEquals(List.of(0, 0, 1), List.of(e.count(Episode.APPROVALS), e.count(Episode.REJECTIONS), e.count(Episode.MALFORMED_VERDICTS)));
        // the retrying solver is told what the team took the reply as
        assertEquals("Q: 12+30=?\nPrevious: \\boxed{42}\nVerifier: reject", e.steps().get(2).prompt().getLast().content());
    }

    @Test
    void oneLoopIsTheSolverAlone() {
        ScriptedPolicy policy = new ScriptedPolicy(HONEST);
        Episode e = orchestra(1, Verdict.APPROVE).run(List.of(Q42), policy).getFirst();
        assertEquals(List.of(SOLVER), e.steps().stream().map(Step::agent).toList());
        assertEquals("\\boxed{41}", e.action());
        assertEquals(1, e.count(Episode.ROUNDS));
        assertEquals(1, policy.calls.size());

        // a team without a verifier is fine with one loop, and an error with more
        Team alone = new Team(List.of(MathAgents.solver(0, "m")));
        MathOrchestra solo = new MathOrchestra(alone, MathOrchestra.Options.DEFAULTS.withMaxLoops(1), MathReward::parseVerdict);
        assertEquals(1, solo.run(List.of(Q42), new ScriptedPolicy(HONEST)).getFirst().steps().size());
        var ex = assertThrows(IllegalArgumentException.class, () -> new MathOrchestra(alone));
        assertTrue(ex.getMessage().contains("max_loops = 2 needs a verifier agent 'verifier'"), ex.getMessage());
    }

    @Test
    void threeLoopsOfRejectionEndAfterTheThirdSolverTurn() {
        ScriptedPolicy policy = new ScriptedPolicy((agent, r) ->
                agent.id().equals(MathAgents.SOLVER) ? boxed(r.turn()) : "<verify>reject</verify>");
        Episode e = orchestra(3, Verdict.APPROVE).run(List.of(Q42), policy).getFirst();
        assertEquals(List.of(SOLVER, VERIFIER, SOLVER, VERIFIER, SOLVER), e.steps().stream().map(Step::agent).toList());
        assertEquals(List.of(0, 1, 2, 3, 4), e.steps().stream().map(Step::turn).toList());
        assertEquals(List.of(0, 0, 1, 1, 2), e.steps().stream().map(Step::loop).toList());
        assertEquals("\\boxed{4}", e.action());
        assertEquals(List.of(0, 2, 0, 3), List.of(e.count(Episode.APPROVALS), e.count(Episode.REJECTIONS), e.count(Episode.MALFORMED_VERDICTS), e.count(Episode.ROUNDS)));
        // each retry sees the answer right before it
        assertEquals("Q: 12+30=?\nPrevious: \\boxed{2}\nVerifier: reject", e.steps().get(4).prompt().getLast().content());
        assertEquals("Q: 12+30=?\nA: \\boxed{2}", e.steps().get(3).prompt().getLast().content());
    }

    @Test
    void batchedEpisodesFinishInDifferentRoundsAndOnlyActiveOnesAreAsked() {
        // episode 0: right at once; 1: wrong then right; 2: never approved; 3: right at once
        List<EpisodeInit> batch = List.of(new EpisodeInit(0, 0, "1+1=?", "2"), new EpisodeInit(0, 1, "2+2=?", "4"),
                new EpisodeInit(1, 2, "3+3=?", "6"), new EpisodeInit(1, 3, "4+4=?", "8"));
        ScriptedPolicy policy = new ScriptedPolicy((agent, r) -> {
            String u = user(r);
            int t = truth(u);
            if (agent.id().equals(MathAgents.SOLVER)) {
                boolean firstTry = !u.contains("Previous:");
                return switch (r.episode()) {
                    case 1 -> boxed(firstTry ? t + 5 : t);
                    case 2 -> boxed(-r.turn());
                    default -> boxed(t);
                };
            }
            return boxedAnswer(u) == t ? "<verify>approve</verify>" : "<verify>reject</verify>";
        });
        List<Episode> out = orchestra(3, Verdict.APPROVE).run(batch, policy);

        assertEquals(List.of("solver", "verifier", "solver", "verifier", "solver"),
                policy.calls.stream().map(ScriptedPolicy.Call::agent).toList());
        assertEquals(List.of(List.of(0, 1, 2, 3), List.of(0, 1, 2, 3), List.of(1, 2), List.of(1, 2), List.of(2)),
                policy.calls.stream().map(ScriptedPolicy.Call::episodes).toList());
        // requests carry the episode's ids and the turn index the step will get
        TurnRequest r = policy.calls.get(2).requests().get(1);
        assertEquals(List.of(2, 1, 2, 2, 1), List.of(r.episode(), r.uid(), r.traj(), r.turn(), r.loop()));

        assertEquals(List.of(0, 1, 2, 3), out.stream().map(Episode::traj).toList(), "episodes come back in input order");
        assertEquals(List.of(2, 4, 5, 2), out.stream().map(e -> e.steps().size()).toList());
        assertEquals(List.of(true, true, false, true), out.stream().map(Episode::approved).toList());
        assertEquals(List.of(1, 2, 3, 1), out.stream().map(e -> e.count(Episode.ROUNDS)).toList());
        assertEquals(List.of("\\boxed{2}", "\\boxed{4}", "\\boxed{-4}", "\\boxed{8}"), out.stream().map(Episode::action).toList());
        Episode second = out.get(1);
        assertEquals(List.of(1, 1), List.of(second.count(Episode.APPROVALS), second.count(Episode.REJECTIONS)));
        assertEquals(List.of(0, 2), second.stepsOf(SOLVER).stream().map(Step::turn).toList());
        assertEquals(List.of(1, 3), second.stepsOf(VERIFIER).stream().map(Step::turn).toList());
        // the policy's payload travels with each step untouched
        assertEquals("payload-verifier-3", second.steps().get(3).output().payload(String.class));
    }

    @Test
    void emptyBatchAsksNobody() {
        ScriptedPolicy policy = new ScriptedPolicy(HONEST);
        assertTrue(orchestra(2, Verdict.APPROVE).run(List.of(), policy).isEmpty());
        assertTrue(policy.calls.isEmpty());
    }

    @Test
    void invalidSolverOutputIsFlaggedButStillTheAction() {
        ScriptedPolicy policy = new ScriptedPolicy((agent, r) ->
                agent.id().equals(MathAgents.SOLVER) ? "42" : "<verify>approve</verify>");
        Episode e = orchestra(2, Verdict.APPROVE).run(List.of(Q42), policy).getFirst();
        assertEquals(List.of(false, true), e.steps().stream().map(Step::valid).toList());
        assertEquals("42", e.action());
    }

    @Test
    void contextPlaceholderAccumulatesEveryOutput() {
        Team team = new Team(List.of(
                MathAgents.solver(0, "m").withSystemPrompt("").withTemplates("Q: {question}", "{context}\nAgain: {question}"),
                MathAgents.verifier(1, "m").withTemplates("{context}\nVerify: {question}", null)));
        MathOrchestra o = new MathOrchestra(team, MathOrchestra.Options.DEFAULTS, MathReward::parseVerdict);
        Episode e = o.run(List.of(Q42), new ScriptedPolicy((agent, r) ->
                agent.id().equals(MathAgents.SOLVER) ? "\\boxed{1}" : "no <verify>reject</verify>")).getFirst();
        assertEquals(List.of(Message.user("solver: \\boxed{1}\nVerify: 12+30=?")), e.steps().get(1).prompt().subList(1, 2));
        assertEquals(List.of(Message.user("solver: \\boxed{1}\nverifier: no <verify>reject</verify>\nAgain: 12+30=?")),
                e.steps().get(2).prompt(), "an empty system prompt sends no system message");
    }

    @Test
    void policyThatAnswersTheWrongNumberOfRequestsIsAnError() {
        AgentPolicy broken = (agent, requests) -> List.of(Turn.of("x"));
        var ex = assertThrows(IllegalStateException.class,
                () -> orchestra(2, Verdict.APPROVE).run(List.of(Q42, Q42), broken));
        assertTrue(ex.getMessage().contains("1 turns for 2 requests of agent 'solver'"), ex.getMessage());
    }

    @Test
    void templateTyposAndStrayAgentsFailWhenTheWorkflowIsBuilt() {
        Team typo = new Team(List.of(MathAgents.solver(0, "m").withTemplates("Q: {questoin}", null), MathAgents.verifier(1, "m")));
        var ex = assertThrows(IllegalArgumentException.class, () -> new MathOrchestra(typo));
        assertTrue(ex.getMessage().contains("agent 'solver' user template \"Q: {questoin}\" uses {questoin}"), ex.getMessage());
        assertTrue(ex.getMessage().contains("available: {context}, {question}"), ex.getMessage());

        // the verifier's first turn has no verdict yet
        Team early = new Team(List.of(MathAgents.solver(0, "m"), MathAgents.verifier(1, "m").withTemplates("{verdict}", null)));
        ex = assertThrows(IllegalArgumentException.class, () -> new MathOrchestra(early));
        assertTrue(ex.getMessage().contains("agent 'verifier' user template \"{verdict}\" uses {verdict}"), ex.getMessage());

        Team extra = new Team(List.of(MathAgents.solver(0, "m"), MathAgents.verifier(1, "m"),
                MathAgents.verifier(2, "m").withId("critic")));
        ex = assertThrows(IllegalArgumentException.class, () -> new MathOrchestra(extra));
        assertTrue(ex.getMessage().contains("also has agent 'critic'"), ex.getMessage());
    }

    @Test
    void agentIdsAreConfigurable() {
        Team team = new Team(List.of(MathAgents.verifier(0, "v").withId("checker"), MathAgents.solver(1, "s").withId("author")));
        Orchestra o = new MathOrchestra(team, new MathOrchestra.Options(2, Verdict.APPROVE, "author", "checker"),
                MathReward::parseVerdict);
        ScriptedPolicy policy = new ScriptedPolicy((agent, r) ->
                agent.id().equals("author") ? boxed(truth(user(r))) : "<verify>approve</verify>");
        Episode e = o.run(List.of(Q42), policy).getFirst();
        assertEquals(List.of(1, 0), e.steps().stream().map(Step::agent).toList(), "steps record the agents' indices");
    }
    @Test
    void theGpuConfigsPromptsFitTheWorkflowAndCarryTheCritique() {
        // configs/math-qwen3-4b.yaml's agents[i].prompts (the Dr. MAS reference's shape): the placeholders are math's,
        // and a second solver turn holds the system message, the question and the verifier's whole reply
        dev.drmas.config.RunConfig cfg = dev.drmas.config.RunConfig.load(java.nio.file.Path.of("../configs/math-qwen3-4b.yaml"));
        MathOrchestra o = new MathOrchestra(MathWorkload.ROLES.team(cfg));
        String critique = "Step 2 adds 12 and 31, not 30. <verify>reject</verify>";
        Episode e = o.run(List.of(Q42), new ScriptedPolicy((agent, r) ->
                agent.id().equals(MathAgents.SOLVER) ? "so \\boxed{43}" : critique)).getFirst();
        assertEquals(3, e.steps().size());
        List<Message> retry = e.steps().get(2).prompt();
        assertEquals(Message.system("You are a helpful and harmless assistant."), retry.getFirst());
        String u = retry.getLast().content();
        assertTrue(u.contains("The problem: 12+30=?") && u.contains("solver: so \\boxed{43}\nverifier: " + critique)
                && u.contains("You are the solver.") && u.contains("within \\boxed{}."), u);
        String v = e.steps().get(1).prompt().getLast().content();
        assertTrue(v.contains("You are the verifier.") && v.contains("<verify>approve</verify>") && v.contains("solver: so \\boxed{43}"), v);
        assertTrue(e.steps().get(1).valid() && !e.approved());
    }
}
