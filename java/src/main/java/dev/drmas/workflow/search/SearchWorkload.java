// SearchWorkload.java — the search workload: a verifier, a searcher and an answerer (roles of the
// config's agents) in SearchOrchestra, questions from the built-in knowledge base or a JSONL file,
// a retriever (in-process Lucene BM25, or a Search-R1 style HTTP server) behind the searcher's tool,
// exact match of the answer (or orchestra.options.grader's command) as the reward of an approved episode
// (F1, tool calls and failed searches logged), and scripted
// demonstrations that follow the knowledge base's search paths.
package dev.drmas.workflow.search;

import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.agent.Turn;
import dev.drmas.agent.TurnRequest;
import dev.drmas.config.AgentSpec;
import dev.drmas.config.DataConfig;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
import dev.drmas.workflow.AnswerGrader;
import dev.drmas.workflow.InvalidActionPenalty;
import dev.drmas.workflow.ReplyFormat;
import dev.drmas.workflow.Roles;
import dev.drmas.workflow.TaskFiles;
import dev.drmas.workflow.Workload;
import java.io.PrintStream;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.function.Predicate;

final class SearchWorkload implements Workload {
    private final Team team;
    private final SearchOrchestra orchestra;
    private final Retriever retriever;
    private final InvalidActionPenalty penalty;
    private final AnswerGrader grader;  // the built-in exact match, or orchestra.options.grader's command
    private final List<Task> train, test;
    private final Map<String, KnowledgeBase.Question> paths = new HashMap<>();  // task id → search path (knowledge base only)
    private final List<String> answerPool = new ArrayList<>();  // wrong answers of demonstrations
    private final PrintStream log;
    private final Map<String, String> roleOf = new HashMap<>();  // agent id → role
    private final boolean retryUnanswered;
    private final boolean requireThink;  // demonstrations then open the searcher's and answerer's replies with a think block

    static final Roles ROLES = new Roles(SearchWorkflow.NAME, List.of(
            Roles.Role.one(SearchOrchestra.VERIFIER, SearchOrchestra::verifierAgent),
            Roles.Role.one(SearchOrchestra.SEARCHER, SearchOrchestra::searcherAgent),
            Roles.Role.one(SearchOrchestra.ANSWERER, (i, model) -> SearchOrchestra.answererAgent(i, model)
                    .withValidity(text -> SearchAnswers.extractAnswer(text).isPresent()))));

    SearchWorkload(RunConfig cfg, PrintStream log) {
        this.log = log;
        SearchOptions o = cfg.orchestra().options(SearchOptions.class);
        this.penalty = new InvalidActionPenalty(o.invalidPenalty());
        for (AgentSpec a : cfg.agents()) roleOf.put(a.id(), a.role());
        // the reference's extra checks: one think block for the searcher and the answerer (its
        // verifier is not asked for one), no Chinese for all three
        Predicate<String> thinking = ReplyFormat.check(o.requireThink(), o.rejectCjk()), plain = ReplyFormat.check(false, o.rejectCjk());
        this.team = ReplyFormat.narrowed(ROLES.team(cfg), a -> roleOf.get(a.id()).equals(SearchOrchestra.VERIFIER) ? plain : thinking);
        this.retryUnanswered = o.retryUnanswered();
        this.requireThink = o.requireThink();
        DataConfig d = cfg.data();
        KnowledgeBase kb = null;
        if (d.source() == DataConfig.Source.JSONL) {
            TaskFiles.Split split = TaskFiles.read(d);
            train = split.train();
            test = split.test();
        } else {
            KnowledgeBaseData k = d.synthetic(KnowledgeBaseData.class);
            kb = KnowledgeBase.generate(new KnowledgeBase.Sizes(k.countries(), k.cities(), k.companies(), k.people()), k.seed());
            KnowledgeBase.Split split = kb.split(k.twoHop(), k.testSize(), k.seed() + 1);
            List<Task> tr = new ArrayList<>(), te = new ArrayList<>();
            for (KnowledgeBase.Question q : split.train()) tr.add(q.task());
            for (KnowledgeBase.Question q : split.test()) te.add(q.task());
            for (KnowledgeBase.Question q : kb.oneHopQuestions()) paths.put(q.task().id(), q);
            for (KnowledgeBase.Question q : kb.twoHopQuestions()) paths.put(q.task().id(), q);
            train = List.copyOf(tr);
            test = List.copyOf(te);
        }
        for (Task t : train) answerPool.add(t.answer());
        this.retriever = retriever(o.retriever(), kb);
        // from here on a failure (a template the orchestra refuses, a grader that cannot start) closes the
        // retriever opened above: the caller gets no workload to close
        try {
            var options = new SearchOrchestra.Options(o.maxTurns(), o.historyLength(), o.malformedVerdict().taken(),
                    idOf(cfg, SearchOrchestra.VERIFIER), idOf(cfg, SearchOrchestra.SEARCHER), idOf(cfg, SearchOrchestra.ANSWERER),
                    o.retryUnanswered());
            this.orchestra = new SearchOrchestra(team, options, SearchOrchestra.VERDICTS, tool(o.retriever()));
            // last (it starts a process): a grader command is sent the truth as Search-R1's data files give it to verl's
            // compute_score
            this.grader = AnswerGrader.of(o.grader(), (text, t) -> SearchAnswers.reward(text, t.golds()), t -> Map.of("target", t.golds()));
        } catch (RuntimeException | Error e) {
            try {
                retriever.close();
            } catch (RuntimeException s) {
                e.addSuppressed(s);
            }
            throw e;
        }
    }

    private static String idOf(RunConfig cfg, String role) {
        return Roles.idsOf(cfg, role).getFirst();
    }

    private static Retriever retriever(RetrieverOptions rc, KnowledgeBase kb) {
        if (rc.type() == RetrieverOptions.Type.HTTP) {
            return new HttpRetriever(URI.create(rc.url()), Duration.ofMillis(Math.round(rc.timeoutS() * 1000)), rc.maxBatch(),
                    rc.request());
        }
        if (rc.index() != null) return Bm25Retriever.open(rc.index());
        if (rc.corpus() != null) return Bm25Retriever.inMemory(CorpusFile.read(rc.corpus()));
        if (kb == null) {
            throw new IllegalArgumentException("orchestra.options.retriever: set corpus (a JSONL passage file) or index (from drmas index): "
                    + "data.source is jsonl, so there is no built-in knowledge base to search");
        }
        return Bm25Retriever.inMemory(kb.passages());
    }

    /**
     * The searcher's tool: the retriever's top-k passages as "(1) Title: text" lines; failures logged. A
     * retrieval server's outage is waited out for outage_s, then stops the run (RetrieverGuard).
     */
    private SearchTool tool(RetrieverOptions rc) {
        RetrieverGuard guard = new RetrieverGuard(retriever, rc.topK(), rc.type() == RetrieverOptions.Type.HTTP ? rc.outageS() : 0,
                rc.url(), log);
        return queries -> {
            List<Retriever.Result> results = guard.search(queries);
            List<SearchTool.Result> out = new ArrayList<>(results.size());
            Set<String> errors = new HashSet<>();
            for (Retriever.Result r : results) {
                if (r.failed()) {
                    errors.add(r.error());
                    out.add(new SearchTool.Result("search failed", true));
                } else {
                    out.add(new SearchTool.Result(format(r.hits(), rc.maxPassageChars()), false));
                }
            }
            // one line per distinct error and batch: a dead server must not flood the log
            for (String e : errors) log.println("drmas: search failed: " + e);
            return out;
        };
    }

    static String format(List<Passage.Hit> hits, int maxChars) {
        if (hits.isEmpty()) return "no results";
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < hits.size(); i++) {
            Passage p = hits.get(i).passage();
            String text = p.text();
            if (maxChars > 0 && text.length() > maxChars) {
                // not between the two halves of a surrogate pair: a lone half is no character, and the tokenizer would write U+FFFD
                int end = Character.isHighSurrogate(text.charAt(maxChars - 1)) ? maxChars - 1 : maxChars;
                text = text.substring(0, end).stripTrailing();
            }
            if (i > 0) sb.append('\n');
            sb.append('(').append(i + 1).append(") ");
            // a title the text starts with (the knowledge base's passages) would only cost prompt tokens
            if (!p.title().isEmpty() && !text.startsWith(p.title())) sb.append(p.title()).append(": ");
            sb.append(text);
        }
        return sb.toString();
    }

    @Override
    public Team team() {
        return team;
    }

    @Override
    public Orchestra orchestra() {
        return orchestra;
    }

    @Override
    public List<Task> train() {
        return train;
    }

    @Override
    public List<Task> test() {
        return test;
    }

    @Override
    public double reward(Task task, Episode e) {
        return e.approved() ? grader.score(e.action(), task) : 0.0;
    }

    @Override
    public double rowScore(double r, Step s) {
        return penalty.rowScore(r, s.valid());
    }

    @Override
    public Map<String, Double> episodeSums(List<Task> tasks, List<Episode> episodes) {
        double f1 = 0, calls = 0, failures = 0, answered = 0, turns = 0, unanswered = 0;
        for (Episode e : episodes) {
            Task t = tasks.get(e.uid());
            f1 += e.approved() ? SearchAnswers.extractAnswer(e.action()).map(a -> SearchAnswers.f1(a, t.golds())).orElse(0.0) : 0;
            calls += e.count(SearchOrchestra.TOOL_CALLS);
            failures += e.count(SearchOrchestra.TOOL_FAILURES);
            answered += e.approved() ? 1 : 0;
            turns += e.count(Episode.ROUNDS);
            unanswered += e.count(SearchOrchestra.UNANSWERED);
        }
        Map<String, Double> m = new LinkedHashMap<>();  // logged per episode
        m.put("search/f1", f1);
        m.put("search/tool_calls", calls);
        m.put("search/failed_searches", failures);  // any > 0 deserves a look at the retriever
        m.put("search/answered_rate", answered);
        m.put("search/turns", turns);
        // answerer replies without an answer that the next turn retried; only with the option on,
        // so that the metrics of runs without it stay as they were
        if (retryUnanswered) m.put("search/unanswered", unanswered);
        return m;
    }

    @Override
    public int maxTurnsPerEpisode() {
        // the verifier and then the searcher or the answerer, every turn (saturated: checked against a bound)
        return (int) Math.min(Integer.MAX_VALUE, 2L * orchestra.options().maxTurns());
    }

    // with require_think the replies a demonstration teaches must pass it: one think block first; else none
    private String thought(String text) {
        return requireThink ? "<think>" + text + "</think>\n" : "";
    }

    @Override
    public AgentPolicy demonstrator(List<Task> tasks, double pCorrect, SplittableRandom rng) {
        Map<Integer, Integer> searches = new HashMap<>();
        return (agent, reqs) -> {
            List<Turn> out = new ArrayList<>(reqs.size());
            for (TurnRequest r : reqs) {
                Task t = tasks.get(r.episode());
                KnowledgeBase.Question q = paths.get(t.id());
                if (q == null) {
                    throw new IllegalStateException("sft for the search workflow needs data.source synthetic: demonstrations "
                            + "follow the built-in knowledge base's search paths (task " + t.id() + " has none)");
                }
                int done = searches.getOrDefault(r.episode(), 0);
                String text = switch (roleOf.get(agent.id())) {
                    case SearchOrchestra.VERIFIER -> {
                        // enough information once the answer is in sight, or once every hop was searched
                        String info = r.messages().getLast().content();
                        String shown = info.substring(Math.min(info.length(), info.indexOf('\n') + 1));
                        boolean enough = done >= q.hopCount() || SearchAnswers.normalize(shown).contains(SearchAnswers.normalize(t.answer()));
                        yield "<verify>" + (enough ? "yes" : "no") + "</verify>";
                    }
                    case SearchOrchestra.SEARCHER -> {
                        searches.put(r.episode(), done + 1);
                        String hop = q.hops().get(Math.min(done, q.hopCount() - 1));
                        yield thought("I need to look up " + hop + ".") + "<search>" + hop + "</search>";
                    }
                    case SearchOrchestra.ANSWERER -> thought("The information answers the question.") + "<answer>"
                            + (rng.nextDouble() < pCorrect ? t.answer() : wrongAnswer(t, rng)) + "</answer>";
                    default -> throw new IllegalStateException("agent '" + agent.id() + "' has no role in the search workflow");
                };
                out.add(Turn.of(text));
            }
            return out;
        };
    }

    private String wrongAnswer(Task t, SplittableRandom rng) {
        for (int i = 0; i < 100; i++) {
            String a = answerPool.get(rng.nextInt(answerPool.size()));
            if (!SearchAnswers.exactMatch(a, t.golds())) return a;
        }
        return t.answer() + " " + t.answer();  // a pool of one answer: wrong by construction
    }

    @Override
    public void close() {
        try (grader) {
            retriever.close();
        }
    }
}
