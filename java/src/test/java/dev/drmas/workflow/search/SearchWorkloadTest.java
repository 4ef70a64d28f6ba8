// SearchWorkloadTest.java — the search workload without models: the warm start's scripted
// demonstrator, run through the real SearchOrchestra and real Lucene BM25 over the knowledge base,
// solves every question when its answers are right (so the demonstrations teach a working search
// path), uses exactly one search per hop, and scores like the reward; team roles are checked; the
// reference's format options (require_think, reject_cjk) and an answerless answer retried, row by row;
// an HTTP retriever's outage is waited out, then stops the run.
package dev.drmas.workflow.search;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Step;
import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
import dev.drmas.testing.ScriptedPolicy;
import dev.drmas.workflow.search.Passage;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class SearchWorkloadTest {
    static RunConfig config(String... overrides) {
        return RunConfig.load(Path.of("..", "configs", "search-toy-drmas.yaml"), List.of(overrides));
    }

    @Test
    void rightDemonstrationsSolveEveryQuestionWithOneSearchPerHop() {
        try (SearchWorkload w = new SearchWorkload(config(), new PrintStream(new ByteArrayOutputStream()))) {
            List<Task> tasks = w.train();
            List<EpisodeInit> init = new ArrayList<>();
            for (int i = 0; i < tasks.size(); i++) init.add(new EpisodeInit(i, i, tasks.get(i).question(), tasks.get(i).answer()));
            List<Episode> eps = w.orchestra().run(init, w.demonstrator(tasks, 1.0, new SplittableRandom(1)));
            Map<Integer, Integer> byCalls = new HashMap<>();
            double solved = 0;
            for (Episode e : eps) {
                Task t = tasks.get(e.uid());
                solved += w.reward(t, e);
                byCalls.merge(e.count(SearchOrchestra.TOOL_CALLS), 1, Integer::sum);
                assertTrue(e.steps().stream().allMatch(Step::valid), "demonstrations are well-formed: " + e);
                for (Step s : e.steps()) assertTrue(w.rowScore(1.0, s) == 1.0);
            }
            System.out.printf("demonstrations (answers right): solved %.0f of %d training questions; episodes by searches: %s%n",
                    solved, eps.size(), byCalls);
            assertEquals(eps.size(), solved, 0, "every question is solved along its search path");
            assertTrue(byCalls.keySet().stream().allMatch(c -> c == 1 || c == 2), "one search per hop: " + byCalls);
            Map<String, Double> m = w.episodeSums(tasks, eps);
            assertEquals(eps.size(), m.get("search/f1"), 1e-9);
            assertEquals(eps.size(), m.get("search/answered_rate"), 0);
            assertEquals(0.0, m.get("search/failed_searches"), 0);
            long searches = byCalls.entrySet().stream().mapToLong(c -> (long) c.getKey() * c.getValue()).sum();
            assertEquals(searches, m.get("search/tool_calls"), 0, "every search of every episode: " + byCalls);
            // failed searches are summed by value too: the first episode again, as if 2 of 3 searches had failed
            Episode first = eps.getFirst();
            Map<String, Integer> counts = new HashMap<>(first.counters());
            counts.put(SearchOrchestra.TOOL_CALLS, 3);
            counts.put(SearchOrchestra.TOOL_FAILURES, 2);
            Episode failing = new Episode(first.uid(), first.traj(), first.question(), first.answer(), first.steps(), first.action(),
                    first.approved(), counts);
            Map<String, Double> f = w.episodeSums(tasks, List.of(first, failing));
            assertEquals(first.count(SearchOrchestra.TOOL_CALLS) + 3, f.get("search/tool_calls"), 0);
            assertEquals(2.0, f.get("search/failed_searches"), 0);
        }
    }

    @Test
    void theRetrieversRequestKeyBinds() {
        assertEquals(RetrieverOptions.Request.BATCH, config().orchestra().options(SearchOptions.class).retriever().request());
        assertEquals(RetrieverOptions.Request.SINGLE, config("++orchestra.options.retriever.request=single").orchestra()
                .options(SearchOptions.class).retriever().request());
    }

    @Test
    void anHttpRetrieversOutageIsWaitedOut() throws java.io.IOException {
        // a closed port: every search fails at once; the tool waits outage_s for the server, then
        // (outside a training step) stops the run naming it, instead of handing back "search failed"
        int port;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
            port = s.getLocalPort();
        }
        String url = "http://127.0.0.1:" + port + "/retrieve";
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        try (SearchWorkload w = new SearchWorkload(config("orchestra.options.retriever.type=http", "++orchestra.options.retriever.url=" + url,
                "++orchestra.options.retriever.outage_s=0.3"), new PrintStream(log))) {
            List<Task> tasks = w.train().subList(0, 1);
            List<EpisodeInit> init = List.of(new EpisodeInit(0, 0, tasks.getFirst().question(), tasks.getFirst().answer()));
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> w.orchestra().run(init, w.demonstrator(tasks, 1.0, new SplittableRandom(1))));
            assertTrue(e.getMessage().contains("the retriever at " + url + " failed every search"), e.getMessage());
            assertTrue(log.toString().contains("trying again in"), "the outage was waited out: " + log);
        }
    }

    @Test
    void withRequireThinkDemonstrationsThinkFirstAndStayValid() {
        // drmas sft must not teach replies that the option then penalises: a searcher or answerer reply without a
        // think block was invalid under require_think, and the warm start taught exactly those
        for (boolean think : new boolean[] {false, true}) {
            try (SearchWorkload w = new SearchWorkload(config("++orchestra.options.require_think=" + think,
                    "++orchestra.options.reject_cjk=true"), new PrintStream(new ByteArrayOutputStream()))) {
                List<Task> tasks = w.train().subList(0, 30);
                List<EpisodeInit> init = new ArrayList<>();
                for (int i = 0; i < tasks.size(); i++) init.add(new EpisodeInit(i, i, tasks.get(i).question(), tasks.get(i).answer()));
                List<Episode> eps = w.orchestra().run(init, w.demonstrator(tasks, 1.0, new SplittableRandom(3)));
                int thinking = 0;
                for (Episode e : eps) {
                    assertEquals(1.0, w.reward(tasks.get(e.uid()), e), e.action());
                    for (Step st : e.steps()) {
                        assertTrue(st.valid(), "require_think=" + think + ": " + st.output().text());
                        if (st.output().text().startsWith("<think>")) thinking++;
                    }
                }
                if (think) assertTrue(thinking >= 2 * eps.size(), "every searcher and answerer turn thinks: " + thinking);
                else assertEquals(0, thinking, "without the option the demonstrations are as before");
            }
        }
    }

    @Test
    void wrongDemonstrationsMissAndInvalidRowsArePenalised() {
        try (SearchWorkload w = new SearchWorkload(config(), new PrintStream(new ByteArrayOutputStream()))) {
            List<Task> tasks = w.train().subList(0, 20);
            List<EpisodeInit> init = new ArrayList<>();
            for (int i = 0; i < tasks.size(); i++) init.add(new EpisodeInit(i, i, tasks.get(i).question(), tasks.get(i).answer()));
            List<Episode> eps = w.orchestra().run(init, w.demonstrator(tasks, 0.0, new SplittableRandom(2)));
            for (Episode e : eps) assertEquals(0.0, w.reward(tasks.get(e.uid()), e), e.action());
            Step s = eps.getFirst().steps().getFirst();
            Step invalid = new Step(s.agent(), 0, 0, s.prompt(), dev.drmas.agent.Turn.of("?"), false);
            assertEquals(-0.01, w.rowScore(0.0, invalid), 1e-12, "the search default penalty");
        }
    }

    @Test
    void passagesAreFormattedWithoutRepeatingTheirTitle() {
        List<Passage.Hit> hits = List.of(new Passage.Hit(new Passage("1", "Mirsk", "Mirsk is a city in Vandor."), 2),
                new Passage.Hit(new Passage("2", "Paris", "Capital of France, on the Seine."), 1));
        assertEquals("(1) Mirsk is a city in Vandor.\n(2) Paris: Capital of France, on the Seine.", SearchWorkload.format(hits, 0));
        assertEquals("(1) Mirsk is\n(2) Paris: Capital o", SearchWorkload.format(hits, 9));
        assertEquals("no results", SearchWorkload.format(List.of(), 0));
    }

    @Test
    void aCutNeverSplitsASurrogatePair() {
        // U+1F600 is two chars; a cut at the first would leave a lone high surrogate in the prompt
        String text = "x".repeat(9) + "\uD83D\uDE00" + " tail";
        String cut = SearchWorkload.format(List.of(new Passage.Hit(new Passage("1", "", text), 1)), 10);
        assertEquals("(1) " + "x".repeat(9), cut);
        assertEquals("(1) " + "x".repeat(9) + "\uD83D\uDE00", SearchWorkload.format(List.of(new Passage.Hit(new Passage("1", "", text), 1)), 11));
    }

    @Test
    void aHugePassageIsCutByDefault() {
        // issue 20: a 5 MB passage of a user's corpus was put into the prompt whole
        int limit = RetrieverOptions.defaults().maxPassageChars();
        assertEquals(2000, limit);
        String huge = "word ".repeat(1_000_000);
        String block = SearchWorkload.format(List.of(new Passage.Hit(new Passage("big", "Big", huge), 1)), limit);
        assertTrue(block.length() <= limit + 20, "information block of " + block.length() + " characters");
        assertEquals(0, SearchWorkload.format(List.of(new Passage.Hit(new Passage("big", "Big", huge), 1)), 0).length() - huge.length()
                - "(1) Big: ".length(), "0 still means no limit");
    }

    @Test
    void retryUnansweredRowsAndTheirPenalties() {
        // verifier no, searcher, verifier yes, an answerless answer (invalid, penalised), then the next turn's
        // verifier and a right answer: the episode scores 1 and only the answerless row loses the penalty
        try (SearchWorkload w = new SearchWorkload(config("orchestra.options.retry_unanswered=true"), new PrintStream(new ByteArrayOutputStream()))) {
            Task t = w.train().getFirst();
            Episode e = w.orchestra().run(List.of(new EpisodeInit(0, 0, t.question(), t.answer())), secondTry(t)).getFirst();
            assertEquals(List.of(0, 1, 0, 2, 0, 2), e.steps().stream().map(Step::agent).toList(), "verifier 0, searcher 1, answerer 2");
            assertEquals(1.0, w.reward(t, e));
            assertEquals(List.of(1.0, 1.0, 1.0, 0.99, 1.0, 1.0), e.steps().stream().map(s -> w.rowScore(w.reward(t, e), s)).toList());
            Map<String, Double> m = w.episodeSums(List.of(t), List.of(e));
            assertEquals(1.0, m.get("search/unanswered"));
            assertEquals(1.0, m.get("search/answered_rate"));
        }
        // off (the default): the answerless answer ends the episode; reward 0, its row -0.01; no unanswered metric
        try (SearchWorkload w = new SearchWorkload(config(), new PrintStream(new ByteArrayOutputStream()))) {
            Task t = w.train().getFirst();
            Episode e = w.orchestra().run(List.of(new EpisodeInit(0, 0, t.question(), t.answer())), secondTry(t)).getFirst();
            assertEquals(List.of(0, 1, 0, 2), e.steps().stream().map(Step::agent).toList());
            assertEquals(List.of(0.0, 0.0, 0.0, -0.01), e.steps().stream().map(s -> w.rowScore(w.reward(t, e), s)).toList());
            assertFalse(w.episodeSums(List.of(t), List.of(e)).containsKey("search/unanswered"));
        }
    }

    private static ScriptedPolicy secondTry(Task t) {
        int[] answers = {0};
        return new ScriptedPolicy((agent, r) -> switch (agent.id()) {
            case "verifier" -> "<verify>" + (r.loop() == 0 ? "no" : "yes") + "</verify>";
            case "searcher" -> "<search>" + t.question() + "</search>";
            default -> answers[0]++ == 0 ? "I do not know" : "<answer>" + t.answer() + "</answer>";
        });
    }

    @Test
    void requireThinkAndRejectCjkNarrowWhichRepliesAreValid() {
        // the Dr. MAS reference's general_projection: check_think_tag for its search and answer agents (exactly one
        // <think> and one </think>, the end after the start), not its verifier; Chinese (U+4E00–U+9FFF) invalid for all three
        String think = "<think>the town</think>";
        Map<String, String> ok = Map.of("verifier", "<verify>yes</verify>", "searcher", think + "<search>Tavo Rilan</search>",
                "answerer", think + "<answer>Mirsk</answer>");
        try (SearchWorkload w = new SearchWorkload(config("orchestra.options.require_think=true"), new PrintStream(new ByteArrayOutputStream()))) {
            assertTrue(w.team().agent("verifier").isValid("<verify>yes</verify>"), "the verifier is not asked to think");
            for (String id : List.of("searcher", "answerer")) {
                var a = w.team().agent(id);
                String tag = ok.get(id).substring(think.length());
                assertTrue(a.isValid(ok.get(id)), id);
                assertTrue(a.isValid("x <think>\nmulti\nline</think>\n" + tag + " 北京"), id + ": CJK is allowed unless reject_cjk");
                assertFalse(a.isValid(tag), id + ": no think block");
                assertFalse(a.isValid("<think>a</think><think>b</think>" + tag), id + ": two think blocks");
                assertFalse(a.isValid("</think>a<think>" + tag), id + ": the end before the start");
                assertFalse(a.isValid("<think>a" + tag), id + ": no end");
                assertFalse(a.isValid("a</think>" + tag), id + ": no start");
                assertFalse(a.isValid("<think><think>a</think>" + tag), id + ": two starts");
                assertFalse(a.isValid("<THINK>a</THINK>" + tag), id + ": the tags are literal, case included");
                assertFalse(a.isValid(think), id + ": its own tag still counts");
            }
        }
        try (SearchWorkload w = new SearchWorkload(config("orchestra.options.reject_cjk=true"), new PrintStream(new ByteArrayOutputStream()))) {
            for (String id : List.of("verifier", "searcher", "answerer")) {
                var a = w.team().agent(id);
                assertTrue(a.isValid(ok.get(id)), id);
                assertTrue(a.isValid(ok.get(id).substring(id.equals("verifier") ? 0 : think.length())), id + ": no think block needed");
                assertFalse(a.isValid(ok.get(id) + " 北京"), id + ": Chinese");
                assertFalse(a.isValid("\u4e00" + ok.get(id)), id + ": U+4E00");
                assertFalse(a.isValid(ok.get(id) + "\u9fff"), id + ": U+9FFF");
                assertTrue(a.isValid(ok.get(id) + " \u4dff\ua000 とうきょう"), id + ": outside the range");
            }
        }
        try (SearchWorkload w = new SearchWorkload(config(), new PrintStream(new ByteArrayOutputStream()))) {
            for (String id : List.of("searcher", "answerer")) {
                assertTrue(w.team().agent(id).isValid(ok.get(id).substring(think.length()) + " 北京"), id + ": both off by default");
            }
        }
    }

    @Test
    void theFormatOptionsMustBeBooleans() {
        for (String key : List.of("require_think", "reject_cjk", "retry_unanswered")) {
            var e = assertThrows(ConfigException.class, () -> config("orchestra.options." + key + "=yes please"));
            assertTrue(e.getMessage().contains("orchestra.options." + key + ": expected true or false"), e.getMessage());
        }
    }

    @Test
    void teamNeedsEachRoleOnce() {
        // refused when the config loads, naming the override, before the workload (or any model) is built
        var e = assertThrows(ConfigException.class, () -> config("agents[2].role=searcher"));
        assertEquals("override 'agents[2].role=searcher': agents[2].role: 'searcher' is also the role of agents[1]; the search"
                + " workflow has at most 1 searcher", e.getMessage());
        e = assertThrows(ConfigException.class, () -> config("agents[0].role=solver"));
        assertEquals("override 'agents[0].role=solver': agents[0].role: 'solver' is not a role of the search workflow (verifier,"
                + " searcher, answerer)", e.getMessage());
    }
}
