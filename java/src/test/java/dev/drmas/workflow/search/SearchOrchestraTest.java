// SearchOrchestraTest.java — the verifier → searcher | answerer state machine with scripted policies
// and a scripted search tool: yes, no, malformed (as yes and as no), the turn limit, the history
// window, failed and missing searches, batches whose episodes end in different turns, an answerless
// answer retried and a missing or empty query kept as the reference does (retry_unanswered), and the
// checks made when the workflow is built.
package dev.drmas.workflow.search;

import static dev.drmas.testing.ScriptedPolicy.user;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Agent;
import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.agent.TurnRequest;
import dev.drmas.agent.Verdict;
import dev.drmas.testing.ScriptedPolicy;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiFunction;
import org.junit.jupiter.api.Test;

class SearchOrchestraTest {
    static final int V = 0, S = 1, A = 2;
    static final Team TEAM = new Team(List.of(SearchOrchestra.verifierAgent(V, "m"), SearchOrchestra.searcherAgent(S, "m"),
            SearchOrchestra.answererAgent(A, "m")));
    static final EpisodeInit Q = new EpisodeInit(5, 11, "Where was Tavo Rilan born?", "Mirsk");

    /** A tool that answers "about <query> #n" (n counting its calls) and fails queries containing "fail". */
    static final class Tool implements SearchTool {
        final List<List<String>> calls = new ArrayList<>();

        @Override
        public List<Result> search(List<String> queries) {
            calls.add(queries);
            return queries.stream().map(q -> q.contains("fail") ? new Result("search failed", true)
                    : new Result("about " + q + " #" + calls.size(), false)).toList();
        }
    }

    static SearchOrchestra orchestra(SearchOrchestra.Options o, Tool tool) {
        return new SearchOrchestra(TEAM, o, SearchOrchestra.VERDICTS, tool);
    }

    static final SearchOrchestra.Options D = SearchOrchestra.Options.DEFAULTS;

    /** Verifier says yes once {@code searches} information blocks are in its prompt. */
    static BiFunction<Agent, TurnRequest, String> after(int searches) {
        return (agent, r) -> switch (agent.id()) {
            case "verifier" -> "<verify>" + (count(user(r), "<information>") >= searches ? "yes" : "no") + "</verify>";
            case "searcher" -> "<search>q" + r.turn() + "</search>";
            default -> "<answer>Mirsk</answer>";
        };
    }

    static int count(String s, String sub) {
        int n = 0;
        for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + 1)) n++;
        return n;
    }

    @Test
    void yesGoesStraightToTheAnswerer() {
        Tool tool = new Tool();
        ScriptedPolicy p = new ScriptedPolicy(after(0));
        Episode e = orchestra(D, tool).run(List.of(Q), p).getFirst();
        assertEquals(List.of(V, A), e.steps().stream().map(Step::agent).toList());
        assertEquals("Q: Where was Tavo Rilan born?\n", e.steps().get(0).prompt().getLast().content(), "no information yet");
        assertEquals("<answer>Mirsk</answer>", e.action());
        assertTrue(e.approved());
        assertEquals(List.of(1, 0, 0, 1, 0, 0), List.of(e.count(Episode.APPROVALS), e.count(Episode.REJECTIONS), e.count(Episode.MALFORMED_VERDICTS), e.count(Episode.ROUNDS), e.count(SearchOrchestra.TOOL_CALLS), e.count(SearchOrchestra.TOOL_FAILURES)));
        assertTrue(tool.calls.isEmpty());
        assertTrue(e.steps().stream().allMatch(Step::valid));
        assertEquals(List.of(5, 11), List.of(e.uid(), e.traj()));
    }

    @Test
    void noSearchesAndTheInformationReachesTheNextTurn() {
        Tool tool = new Tool();
        Episode e = orchestra(D, tool).run(List.of(Q), new ScriptedPolicy(after(2))).getFirst();
        assertEquals(List.of(V, S, V, S, V, A), e.steps().stream().map(Step::agent).toList());
        assertEquals(List.of(List.of("q1"), List.of("q3")), tool.calls, "the query is the search tag's content; turn = step index");
        assertEquals("Q: Where was Tavo Rilan born?\n<information>about q1 #1</information>",
                e.steps().get(2).prompt().getLast().content());
        assertEquals("Q: Where was Tavo Rilan born?\n<information>about q1 #1</information>\n<information>about q3 #2</information>",
                e.steps().get(5).prompt().getLast().content(), "the answerer sees what the verifier saw");
        assertEquals(List.of(0, 0, 1, 1, 2, 2), e.steps().stream().map(Step::loop).toList());
        assertEquals(List.of(1, 2, 0, 3, 2, 0), List.of(e.count(Episode.APPROVALS), e.count(Episode.REJECTIONS), e.count(Episode.MALFORMED_VERDICTS), e.count(Episode.ROUNDS), e.count(SearchOrchestra.TOOL_CALLS), e.count(SearchOrchestra.TOOL_FAILURES)));
        assertTrue(e.approved());
    }

    @Test
    void turnLimitEndsWithoutAnswerAndWithoutALastSearch() {
        Tool tool = new Tool();
        Episode e = orchestra(D.withMaxTurns(3), tool).run(List.of(Q), new ScriptedPolicy(after(99))).getFirst();
        assertEquals(List.of(V, S, V, S, V), e.steps().stream().map(Step::agent).toList(),
                "the searcher is not asked in the last turn: its result could not be used");
        assertFalse(e.approved());
        assertEquals("", e.action());
        assertEquals(List.of(0, 3, 3, 2), List.of(e.count(Episode.APPROVALS), e.count(Episode.REJECTIONS), e.count(Episode.ROUNDS), e.count(SearchOrchestra.TOOL_CALLS)));
        Episode one = orchestra(D.withMaxTurns(1), new Tool()).run(List.of(Q), new ScriptedPolicy(after(99))).getFirst();
        assertEquals(List.of(V), one.steps().stream().map(Step::agent).toList());
    }

    @Test
    void historyWindowKeepsTheLatestBlocks() {
        Tool tool = new Tool();
        Episode e = orchestra(D.withMaxTurns(4).withHistoryLength(2), tool).run(List.of(Q), new ScriptedPolicy(after(99))).getFirst();
        String last = e.steps().getLast().prompt().getLast().content();  // the verifier of turn 3, after 3 searches
        assertEquals("Q: Where was Tavo Rilan born?\n<information>about q3 #2</information>\n<information>about q5 #3</information>", last);
        assertFalse(last.contains("#1"));
    }

    @Test
    void malformedVerdictCountsAsConfigured() {
        BiFunction<Agent, TurnRequest, String> rambling = (agent, r) -> switch (agent.id()) {
            case "verifier" -> "I think so";
            case "searcher" -> "<search>x</search>";
            default -> "<answer>y</answer>";
        };
        Episode asYes = orchestra(D, new Tool()).run(List.of(Q), new ScriptedPolicy(rambling)).getFirst();
        assertEquals(List.of(V, A), asYes.steps().stream().map(Step::agent).toList());
        assertEquals(1, asYes.count(Episode.MALFORMED_VERDICTS));
        assertFalse(asYes.steps().getFirst().valid(), "a malformed verdict is an invalid action");

        Episode asNo = orchestra(D.withMalformedAs(Verdict.REJECT).withMaxTurns(2), new Tool()).run(List.of(Q),
                new ScriptedPolicy(rambling)).getFirst();
        assertEquals(List.of(V, S, V), asNo.steps().stream().map(Step::agent).toList());
        assertEquals(List.of(0, 0, 2), List.of(asNo.count(Episode.APPROVALS), asNo.count(Episode.REJECTIONS), asNo.count(Episode.MALFORMED_VERDICTS)));
        assertFalse(asNo.approved());
    }

    @Test
    void batchedEpisodesEndInDifferentTurnsAndBadSearchesAreCounted() {
        Tool tool = new Tool();
        List<EpisodeInit> batch = List.of(new EpisodeInit(0, 0, "q-zero", "a"), new EpisodeInit(0, 1, "q-one", "a"),
                new EpisodeInit(1, 2, "q-fail", "a"), new EpisodeInit(1, 3, "q-silent", "a"));
        ScriptedPolicy p = new ScriptedPolicy((agent, r) -> {
            String u = user(r);
            int info = count(u, "<information>");
            return switch (agent.id()) {
                case "verifier" -> u.startsWith("Q: q-zero") || info >= 1 ? "<verify>yes</verify>" : "<verify>no</verify>";
                case "searcher" -> u.startsWith("Q: q-silent") ? "no tag here" : "<search>" + u.substring(3, u.indexOf('\n')) + "</search>";
                default -> "<answer>a</answer>";
            };
        });
        List<Episode> eps = orchestra(D.withMaxTurns(3), tool).run(batch, p);
        // turn 0: the verifier sees all four; one answers, three search (one without a query)
        assertEquals(List.of("verifier", "answerer", "searcher", "verifier", "answerer", "searcher", "verifier"),
                p.calls.stream().map(ScriptedPolicy.Call::agent).toList());
        assertEquals(List.of(0, 1, 2, 3), p.calls.get(0).episodes());
        assertEquals(List.of(1, 2, 3), p.calls.get(2).episodes());
        assertEquals(List.of(List.of("q-one", "q-fail")), tool.calls, "one batched call; a reply without a query searches nothing");
        assertEquals(List.of(true, true, true, false), eps.stream().map(Episode::approved).toList());
        assertEquals(List.of(0, 1, 1, 0), eps.stream().map(e -> e.count(SearchOrchestra.TOOL_CALLS)).toList());
        assertEquals(List.of(0, 0, 1, 0), eps.stream().map(e -> e.count(SearchOrchestra.TOOL_FAILURES)).toList());
        assertTrue(eps.get(2).steps().get(2).prompt().getLast().content().contains("<information>search failed</information>"));
        Step silent = eps.get(3).steps().get(1);
        assertEquals(S, silent.agent());
        assertFalse(silent.valid(), "a searcher reply without a query is an invalid action");
        assertEquals(3, eps.get(3).count(Episode.ROUNDS));
    }

    @Test
    void theStepHistoryTheTurnAndTheTurnsContextFillTheTemplates() {
        // the Dr. MAS reference's prompts: the step number, the past steps' queries with their information,
        // and (for the searcher and the answerer) the verifier's reply of this turn
        String t = "Q: {question} | turn {turn} | history [{history}] | context [{context}]";
        Team team = new Team(List.of(SearchOrchestra.verifierAgent(V, "m").withTemplates(t, null),
                SearchOrchestra.searcherAgent(S, "m").withTemplates(t, null), SearchOrchestra.answererAgent(A, "m").withTemplates(t, null)));
        Tool tool = new Tool();
        Episode e = new SearchOrchestra(team, D.withHistoryLength(1), SearchOrchestra.VERDICTS, tool)
                .run(List.of(Q), new ScriptedPolicy((agent, r) -> switch (agent.id()) {
                    case "verifier" -> "thinking <verify>" + (count(user(r), "<information>") >= 1 && user(r).contains("turn 3") ? "yes" : "no")
                            + "</verify>";
                    case "searcher" -> "<search>q" + r.turn() + "</search>";
                    default -> "<answer>Mirsk</answer>";
                })).getFirst();
        assertEquals(List.of(V, S, V, S, V, A), e.steps().stream().map(Step::agent).toList());
        String q = "Q: Where was Tavo Rilan born? | ";
        assertEquals(q + "turn 1 | history [] | context []", userAt(e, 0));
        assertEquals(q + "turn 1 | history [] | context [verifier: thinking <verify>no</verify>]", userAt(e, 1));
        assertEquals(q + "turn 2 | history [Step 1: <search>q1</search> <information>about q1 #1</information>] | context []", userAt(e, 2));
        // history_length 1: the window keeps the latest search only, as {information} does
        assertEquals(q + "turn 3 | history [Step 2: <search>q3</search> <information>about q3 #2</information>] | context []", userAt(e, 4));
        assertEquals(q + "turn 3 | history [Step 2: <search>q3</search> <information>about q3 #2</information>]"
                + " | context [verifier: thinking <verify>yes</verify>]", userAt(e, 5));
    }

    private static String userAt(Episode e, int step) {
        return e.steps().get(step).prompt().getLast().content();
    }

    /** No, then yes; the answerer's first reply has no answer tag, its second answers. */
    static BiFunction<Agent, TurnRequest, String> answersOnItsSecondTry() {
        return (agent, r) -> switch (agent.id()) {
            case "verifier" -> "<verify>" + (r.loop() == 0 ? "no" : "yes") + "</verify>";
            case "searcher" -> "<search>q" + r.loop() + "</search>";
            default -> user(r).contains("answer=yes") ? "<answer>Mirsk</answer>" : "I am not sure";
        };
    }

    @Test
    void retryUnansweredStartsTheNextTurnWithTheVerifier() {
        // the Dr. MAS reference's environment: an answerer reply without <answer>…</answer> projects to the
        // empty action, which does not end the episode (skyrl_gym/envs/search/env.py _is_done); the team's
        // memory keeps it as a step with no query and no information
        String t = "Q: {question} | turn {turn} | history [{history}] | info [{information}] | context [{context}]";
        Team team = new Team(List.of(SearchOrchestra.verifierAgent(V, "m").withTemplates(t, null),
                SearchOrchestra.searcherAgent(S, "m").withTemplates(t, null),
                SearchOrchestra.answererAgent(A, "m").withTemplates(t, "answer=yes " + t)));
        Tool tool = new Tool();
        Episode e = new SearchOrchestra(team, D.withRetryUnanswered(true), SearchOrchestra.VERDICTS, tool)
                .run(List.of(Q), new ScriptedPolicy(answersOnItsSecondTry())).getFirst();
        assertEquals(List.of(V, S, V, A, V, A), e.steps().stream().map(Step::agent).toList());
        assertEquals(List.of(0, 0, 1, 1, 2, 2), e.steps().stream().map(Step::loop).toList());
        assertEquals(List.of(true, true, true, false, true, true), e.steps().stream().map(Step::valid).toList(),
                "the answerless reply is an invalid action");
        assertEquals("<answer>Mirsk</answer>", e.action());
        assertTrue(e.approved());
        assertEquals(List.of(2, 1, 3, 1, 1), List.of(e.count(Episode.APPROVALS), e.count(Episode.REJECTIONS), e.count(Episode.ROUNDS),
                e.count(SearchOrchestra.TOOL_CALLS), e.count(SearchOrchestra.UNANSWERED)));
        String q = "Q: Where was Tavo Rilan born? | ";
        String step1 = "Step 1: <search>q0</search> <information>about q0 #1</information>";
        // the next turn's verifier: a new turn, its context empty; the answerless step in the history, as
        // the reference's "Step 2:" with an empty query and no information; no information block for it
        assertEquals(q + "turn 3 | history [" + step1 + "\nStep 2:] | info [<information>about q0 #1</information>] | context []", userAt(e, 4));
        assertEquals("answer=yes " + q + "turn 3 | history [" + step1 + "\nStep 2:] | info [<information>about q0 #1</information>]"
                + " | context [verifier: <verify>yes</verify>]", userAt(e, 5));

        // the step takes a place in the history window, as a memory record does in the reference's
        Episode one = new SearchOrchestra(team, D.withRetryUnanswered(true).withHistoryLength(1), SearchOrchestra.VERDICTS, new Tool())
                .run(List.of(Q), new ScriptedPolicy(answersOnItsSecondTry())).getFirst();
        assertTrue(userAt(one, 4).contains("history [Step 2:]"), userAt(one, 4));

        // off (the default): the answerless reply ends the episode, which scores 0
        Episode off = orchestra(D, new Tool()).run(List.of(Q), new ScriptedPolicy(answersOnItsSecondTry())).getFirst();
        assertEquals(List.of(V, S, V, A), off.steps().stream().map(Step::agent).toList());
        assertEquals("I am not sure", off.action());
        assertEquals(0, off.count(SearchOrchestra.UNANSWERED));
    }

    @Test
    void retryUnansweredKeepsASearchlessStepAndSearchesAnEmptyQuery() {
        // the reference's environment: a searcher reply without a search tag is the empty action, which its memory
        // keeps as "Step t:" (a place in the window); "<search></search>" is a query, the empty one, sent to the tool
        String t = "Q: {question} | history [{history}]";
        Team team = new Team(List.of(SearchOrchestra.verifierAgent(V, "m").withTemplates(t, null),
                SearchOrchestra.searcherAgent(S, "m").withTemplates(t, null), SearchOrchestra.answererAgent(A, "m").withTemplates(t, null)));
        List<EpisodeInit> batch = List.of(new EpisodeInit(0, 0, "q-silent", "a"), new EpisodeInit(0, 1, "q-empty", "a"));
        BiFunction<Agent, TurnRequest, String> script = (agent, r) -> switch (agent.id()) {
            case "verifier" -> "<verify>" + (r.loop() == 0 ? "no" : "yes") + "</verify>";
            case "searcher" -> user(r).startsWith("Q: q-silent") ? "no tag here" : "<search> </search>";
            default -> "<answer>a</answer>";
        };
        Tool tool = new Tool();
        List<Episode> eps = new SearchOrchestra(team, D.withRetryUnanswered(true), SearchOrchestra.VERDICTS, tool).run(batch, new ScriptedPolicy(script));
        assertEquals(List.of(List.of("")), tool.calls, "the empty query is searched; no tag searches nothing");
        assertEquals("Q: q-silent | history [Step 1:]", userAt(eps.get(0), 2));
        assertEquals("Q: q-empty | history [Step 1: <search></search> <information>about  #1</information>]", userAt(eps.get(1), 2));
        assertEquals(List.of(0, 1), eps.stream().map(e -> e.count(SearchOrchestra.TOOL_CALLS)).toList());
        assertEquals(List.of(false, false), eps.stream().map(e -> e.steps().get(1).valid()).toList(), "both stay invalid actions in drmas");
        // off (the default): neither searches nor leaves a step in the history
        Tool off = new Tool();
        List<Episode> plain = new SearchOrchestra(team, D, SearchOrchestra.VERDICTS, off).run(batch, new ScriptedPolicy(script));
        assertEquals(List.of(), off.calls);
        assertEquals("Q: q-silent | history []", userAt(plain.get(0), 2));
        assertEquals("Q: q-empty | history []", userAt(plain.get(1), 2));
    }

    @Test
    void retryUnansweredStopsAtTheTurnLimitAndAnEmptyAnswerTagEndsTheEpisode() {
        // out of turns: the answerless reply of the last turn ends the episode (reward 0), as without the option
        Episode last = orchestra(D.withRetryUnanswered(true).withMaxTurns(2), new Tool()).run(List.of(Q),
                new ScriptedPolicy(answersOnItsSecondTry())).getFirst();
        assertEquals(List.of(V, S, V, A), last.steps().stream().map(Step::agent).toList());
        assertEquals("I am not sure", last.action());
        assertEquals(0, last.count(SearchOrchestra.UNANSWERED));
        // an answer tag, even an empty one, is an answer: the reference's projection keeps "<answer></answer>"
        // and its environment ends the episode on it
        for (String reply : List.of("<answer></answer>", "<answer> </answer>")) {
            Episode empty = orchestra(D.withRetryUnanswered(true), new Tool()).run(List.of(Q), new ScriptedPolicy((agent, r) ->
                    agent.id().equals("verifier") ? "<verify>yes</verify>" : reply)).getFirst();
            assertEquals(List.of(V, A), empty.steps().stream().map(Step::agent).toList(), reply);
            assertEquals(reply, empty.action());
        }
        // an unclosed tag is no answer: retried
        Episode open = orchestra(D.withRetryUnanswered(true).withMaxTurns(2), new Tool()).run(List.of(Q), new ScriptedPolicy((agent, r) ->
                agent.id().equals("verifier") ? "<verify>yes</verify>" : "<answer>Mirsk")).getFirst();
        assertEquals(List.of(V, A, V, A), open.steps().stream().map(Step::agent).toList());
        assertEquals(1, open.count(SearchOrchestra.UNANSWERED));
    }

    @Test
    void buildChecksTheTeam() {
        Team two = new Team(List.of(SearchOrchestra.verifierAgent(0, "m"), SearchOrchestra.searcherAgent(1, "m")));
        var e = assertThrows(IllegalArgumentException.class, () -> new SearchOrchestra(two, D, SearchOrchestra.VERDICTS, new Tool()));
        assertTrue(e.getMessage().contains("needs a answerer agent 'answerer'") || e.getMessage().contains("answerer"), e.getMessage());
        Team typo = new Team(List.of(SearchOrchestra.verifierAgent(0, "m"), SearchOrchestra.searcherAgent(1, "m"),
                SearchOrchestra.answererAgent(2, "m").withTemplates("Q: {question} {contxt}", null)));
        e = assertThrows(IllegalArgumentException.class, () -> new SearchOrchestra(typo, D, SearchOrchestra.VERDICTS, new Tool()));
        assertTrue(e.getMessage().contains("uses {contxt}")
                && e.getMessage().contains("available: {context}, {history}, {information}, {question}, {turn}"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> D.withMaxTurns(0));
        assertThrows(IllegalArgumentException.class, () -> D.withHistoryLength(0));
    }
    @Test
    void theGpuConfigsPromptsFitTheWorkflow() {
        // configs/search-qwen2.5-7b.yaml's agents[i].prompts (the Dr. MAS reference's shape): the searcher reads the
        // verifier's reply of its step, every agent the past steps with their queries
        dev.drmas.config.RunConfig cfg = dev.drmas.config.RunConfig.load(java.nio.file.Path.of("../configs/search-qwen2.5-7b.yaml"));
        Tool tool = new Tool();
        Episode e = new SearchOrchestra(SearchWorkload.ROLES.team(cfg), D, SearchOrchestra.VERDICTS, tool).run(List.of(Q), new ScriptedPolicy((agent, r) ->
                switch (agent.id()) {
                    case "verifier" -> "<think>need the town</think><verify>" + (user(r).contains("Step 1: <search>") ? "yes" : "no") + "</verify>";
                    case "searcher" -> "<think>x</think><search>Tavo Rilan birthplace</search>";
                    default -> "<answer>Mirsk</answer>";
                })).getFirst();
        assertEquals(List.of(V, S, V, A), e.steps().stream().map(Step::agent).toList());
        String s = userAt(e, 1), a = userAt(e, 3);
        assertTrue(s.contains("The question: Where was Tavo Rilan born?") && s.contains("outputs at step 1")
                && s.contains("verifier: <think>need the town</think><verify>no</verify>") && s.contains("You are the searcher"), s);
        assertTrue(a.contains("Step 1: <search>Tavo Rilan birthplace</search> <information>about Tavo Rilan birthplace #1</information>")
                && a.contains("You are the answerer") && !a.contains("verifier:"), a);
        assertTrue(userAt(e, 2).contains("This is step 2."), userAt(e, 2));
        assertEquals("<answer>Mirsk</answer>", e.action());
    }
    @Test
    void aFollowUpTemplateServesAnAgentsLaterTurns() {
        Team team = new Team(List.of(SearchOrchestra.verifierAgent(V, "m").withTemplates("FIRST {question}", "LATER {turn} {history}"),
                SearchOrchestra.searcherAgent(S, "m").withTemplates("S1 {question}", "S2 {history}"), SearchOrchestra.answererAgent(A, "m")));
        Episode e = new SearchOrchestra(team, D, SearchOrchestra.VERDICTS, new Tool()).run(List.of(Q), new ScriptedPolicy(after(2))).getFirst();
        assertEquals(List.of(V, S, V, S, V, A), e.steps().stream().map(Step::agent).toList());
        assertEquals("FIRST Where was Tavo Rilan born?", userAt(e, 0));
        assertEquals("S1 Where was Tavo Rilan born?", userAt(e, 1));
        assertEquals("LATER 2 Step 1: <search>q1</search> <information>about q1 #1</information>", userAt(e, 2));
        assertTrue(userAt(e, 3).startsWith("S2 Step 1: <search>q1</search>"), userAt(e, 3));
        assertTrue(userAt(e, 4).startsWith("LATER 3 "), userAt(e, 4));
    }
}
