// SearchWorkloadTest.java — the search workload without models: the warm start's scripted
// demonstrator, run through the real SearchOrchestra and real Lucene BM25 over the knowledge base,
// solves every question when its answers are right (so the demonstrations teach a working search
// path), uses exactly one search per hop, and scores like the reward; team roles are checked.
package dev.drmas.workflow.search;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Step;
import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
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
