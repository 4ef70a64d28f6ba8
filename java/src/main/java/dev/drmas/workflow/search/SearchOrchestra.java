// SearchOrchestra.java — the paper's search workflow, a three-agent hierarchy: in each of up to
// max_turns turns the verifier reads the question and the information retrieved so far and says
// <verify>yes</verify> (enough to answer) or <verify>no</verify>. Yes: the answerer writes
// <answer>…</answer> and the episode ends (with retry_unanswered, a reply without an answer tag
// does not end it while turns remain: the next turn starts with the verifier again, as in the Dr.
// MAS reference's environment). No: the searcher writes <search>query</search>, the tool
// returns passages, appended to the history as <information>…</information> (the last
// history_length blocks are shown; with retry_unanswered, the reference mode, a searcher reply
// without a search tag is a step with no query in {history}, and an empty <search></search> is searched
// as the empty query, as the reference's environment does). An episode without an answer after the last turn has no action
// (reward 0); the searcher is not asked in the last turn, as its result could not be used.
// Counters: the verifier's verdicts (Episode.APPROVALS, ...), Episode.ROUNDS (turns), TOOL_CALLS,
// TOOL_FAILURES and UNANSWERED.
package dev.drmas.workflow.search;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Message;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.PromptTemplate;
import dev.drmas.agent.RunningEpisode;
import dev.drmas.agent.Tags;
import dev.drmas.agent.Team;
import dev.drmas.agent.Turn;
import dev.drmas.agent.Verdict;
import dev.drmas.agent.VerdictParser;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.function.Function;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * Agents' user templates are filled with {@code {question}}; {@code {information}} (the history
 * window: the last history_length information blocks, one per line; empty before the first
 * search); {@code {history}} (the same window with each block's query and turn, one line a search,
 * "Step t: <search>query</search> <information>…</information>", as the Dr. MAS reference's
 * memory shows the team its past steps; with retryUnanswered, an answerless answerer turn and a
 * searcher turn without a search tag as "Step t:", as that memory keeps the empty action); {@code {turn}} (the turn, from 1); {@code {context}} (what
 * teammates wrote earlier in this turn, one "agent: text" line each: the searcher and the
 * answerer see the verifier's reply; empty for the verifier).
 */
public final class SearchOrchestra implements Orchestra {
    public static final String NAME = "search";
    public static final String VERIFIER = "verifier", SEARCHER = "searcher", ANSWERER = "answerer";
    /** Counters of an episode: queries sent to the tool, and those that failed (timeout or error). */
    public static final String TOOL_CALLS = "tool_calls", TOOL_FAILURES = "tool_failures";
    /** Counter of an episode: answerer replies without an answer tag that did not end it (retry_unanswered). */
    public static final String UNANSWERED = "unanswered";
    /** The verifier's parser: the last <verify>yes</verify> (APPROVE: answer now) or <verify>no</verify> (REJECT: search). */
    public static final VerdictParser VERDICTS = VerdictParser.lastTag("yes", "no");

    /**
     * @param maxTurns      turns of verifier then answerer or searcher, ≥ 1
     * @param historyLength information blocks shown to the agents (the latest ones), ≥ 1
     * @param malformedAs   what a verifier reply without a yes/no tag counts as: APPROVE (yes,
     *                      answer; default) or REJECT (no, search)
     * @param retryUnanswered an answerer reply without an {@code <answer>…</answer>} tag ends the
     *                      episode (false, default) or, while turns remain, is followed by the next
     *                      turn's verifier (true: the reference's environment, whose episode ends
     *                      only on an answer or the turn limit)
     */
    public record Options(int maxTurns, int historyLength, Verdict malformedAs, String verifier, String searcher,
                          String answerer, boolean retryUnanswered) {
        public static final Options DEFAULTS = new Options(4, 4, Verdict.APPROVE, VERIFIER, SEARCHER, ANSWERER, false);

        public Options {
            if (maxTurns < 1) throw new IllegalArgumentException("orchestra 'search': max_turns = " + maxTurns + " must be >= 1");
            if (historyLength < 1) {
                throw new IllegalArgumentException("orchestra 'search': history_length = " + historyLength + " must be >= 1");
            }
            if (malformedAs == Verdict.MALFORMED || malformedAs == null) {
                throw new IllegalArgumentException("orchestra 'search': malformed verdicts must count as approve (yes) or reject (no)");
            }
            Objects.requireNonNull(verifier, "verifier");
            Objects.requireNonNull(searcher, "searcher");
            Objects.requireNonNull(answerer, "answerer");
        }

        public Options withMaxTurns(int n) {
            return new Options(n, historyLength, malformedAs, verifier, searcher, answerer, retryUnanswered);
        }

        public Options withHistoryLength(int n) {
            return new Options(maxTurns, n, malformedAs, verifier, searcher, answerer, retryUnanswered);
        }

        public Options withMalformedAs(Verdict v) {
            return new Options(maxTurns, historyLength, v, verifier, searcher, answerer, retryUnanswered);
        }

        public Options withRetryUnanswered(boolean retry) {
            return new Options(maxTurns, historyLength, malformedAs, verifier, searcher, answerer, retry);
        }
    }

    static final String Q = "question", INFORMATION = "information", HISTORY = "history", TURN = "turn", CONTEXT = "context";
    private static final Set<String> ALL = Set.of(Q, INFORMATION, HISTORY, TURN, CONTEXT);
    /** {@code <search>(.*?)</search>}, across lines. */
    static final Tags.Tag SEARCH_TAG = Tags.Tag.of("<search>", "</search>", 0);

    private final Team team;
    private final Options options;
    private final VerdictParser parser;
    private final SearchTool tool;
    private final Agent verifier, searcher, answerer;

    public SearchOrchestra(Team team, Options options, VerdictParser parser, SearchTool tool) {
        this.team = Objects.requireNonNull(team, "team");
        this.options = Objects.requireNonNull(options, "options");
        this.parser = Objects.requireNonNull(parser, "parser");
        this.tool = Objects.requireNonNull(tool, "search tool");
        this.verifier = need(team, options.verifier(), "verifier");
        this.searcher = need(team, options.searcher(), "searcher");
        this.answerer = need(team, options.answerer(), "answerer");
        if (team.size() != 3) {
            throw new IllegalArgumentException("orchestra 'search' calls exactly a verifier, a searcher and an answerer; the team has "
                    + team.size() + " agents: " + String.join(", ", team.agents().stream().map(Agent::id).toList()));
        }
        for (Agent a : List.of(verifier, searcher, answerer)) a.requirePlaceholders("orchestra 'search'", ALL, ALL);
    }

    private static Agent need(Team team, String id, String role) {
        if (!team.has(id)) {
            throw new IllegalArgumentException("orchestra 'search' needs a " + role + " agent '" + id + "'; the team has: "
                    + String.join(", ", team.agents().stream().map(Agent::id).toList()));
        }
        return team.agent(id);
    }

    // ------------------------------------------------------------------ the agents' prompts

    /** The verifier, with prompts that tiny character-level models can follow. */
    public static Agent verifierAgent(int index, String modelId) {
        return new Agent(VERIFIER, index, modelId, "Is the information enough to answer? Reply <verify>yes</verify> or <verify>no</verify>.",
                PromptTemplate.of("Q: {question}\n{information}"), null, text -> VERDICTS.parse(text) != Verdict.MALFORMED);
    }

    /** The searcher; valid when it writes a non-empty search tag. */
    public static Agent searcherAgent(int index, String modelId) {
        return new Agent(SEARCHER, index, modelId, "Write a search query as <search>query</search>.",
                PromptTemplate.of("Q: {question}\n{information}"), null, text -> query(text).isPresent());
    }

    /** The answerer; its validity (a non-empty answer tag) is the environment's to set. */
    public static Agent answererAgent(int index, String modelId) {
        return new Agent(ANSWERER, index, modelId, "Answer as <answer>answer</answer>.",
                PromptTemplate.of("Q: {question}\n{information}"), null, text -> text.contains("<answer>"));
    }

    /** The query of a searcher reply: the content of its last {@code <search>} tag, stripped; empty if none or blank. */
    public static Optional<String> query(String text) {
        return SEARCH_TAG.lastStripped(text);
    }

    @Override
    public Team team() {
        return team;
    }

    public Options options() {
        return options;
    }

    // ------------------------------------------------------------------ the workflow

    private static final class State extends RunningEpisode {
        final Deque<String> history = new ArrayDeque<>();  // the information blocks in the window
        final Deque<String> steps = new ArrayDeque<>();    // the same window with each block's query and turn
        int turn;                                          // the turn under way, from 0
        final StringBuilder context = new StringBuilder(); // this turn's outputs so far

        State(EpisodeInit init) {
            super(init);
        }

        Map<String, String> values() {
            Map<String, String> v = new HashMap<>();
            v.put(Q, init().question());
            v.put(INFORMATION, String.join("\n", history));
            v.put(HISTORY, String.join("\n", steps));
            v.put(TURN, Integer.toString(turn + 1));
            v.put(CONTEXT, context.toString());
            return v;
        }

        void said(Agent agent, String text) {
            if (!context.isEmpty()) context.append('\n');
            context.append(agent.id()).append(": ").append(text);
        }
    }

    @Override
    public List<Episode> run(List<EpisodeInit> episodes, AgentPolicy policy) {
        List<State> states = new ArrayList<>(episodes.size());
        for (EpisodeInit e : episodes) states.add(new State(e));
        for (int turn = 0; turn < options.maxTurns(); turn++) {
            List<Integer> active = RunningEpisode.active(states);
            if (active.isEmpty()) break;
            for (int i : active) {
                states.get(i).turn = turn;
                states.get(i).context.setLength(0);
            }

            List<Turn> verdicts = call(verifier, states, active, turn, policy);
            List<Integer> answering = new ArrayList<>(), searching = new ArrayList<>();
            for (int j = 0; j < active.size(); j++) {
                State st = states.get(active.get(j));
                st.count(Episode.ROUNDS);
                st.said(verifier, verdicts.get(j).text());
                Verdict taken = st.judge(parser, verdicts.get(j).text(), options.malformedAs());
                if (taken == Verdict.APPROVE) {
                    answering.add(active.get(j));
                } else if (turn < options.maxTurns() - 1) {
                    searching.add(active.get(j));
                } else {
                    st.done = true;  // out of turns without an answer: no action, reward 0
                }
            }
            // the answerer's and the searcher's turns do not wait for each other: one policy call, so
            // that agents sharing a model are generated in one batch
            List<Agent> agents = new ArrayList<>(2);
            List<List<Integer>> which = new ArrayList<>(2);
            if (!answering.isEmpty()) {
                agents.add(answerer);
                which.add(answering);
            }
            if (!searching.isEmpty()) {
                agents.add(searcher);
                which.add(searching);
            }
            if (agents.isEmpty()) continue;
            List<Function<State, List<Message>>> prompts = new ArrayList<>(2);
            for (Agent a : agents) prompts.add(st -> a.conversation(st.hasActed(a), st.values()));
            List<List<Turn>> replies = RunningEpisode.callTogether(agents, states, which, turn, policy, prompts);
            int k = 0;
            if (!answering.isEmpty()) {
                List<Turn> answers = replies.get(k++);
                for (int j = 0; j < answering.size(); j++) {
                    State st = states.get(answering.get(j));
                    if (options.retryUnanswered() && turn < options.maxTurns() - 1 && SearchAnswers.ANSWER.last(answers.get(j).text()) == null) {
                        unanswered(st);
                        continue;
                    }
                    st.action = answers.get(j).text();
                    st.approved = true;
                    st.done = true;
                }
            }
            if (!searching.isEmpty()) search(states, searching, replies.get(k));
        }
        List<Episode> out = new ArrayList<>(states.size());
        for (State st : states) out.add(st.finish());
        return out;
    }

    // An answerer reply without an answer tag, with retry_unanswered: the episode goes on. The
    // reference's environment takes the reply as the empty action, which searches nothing and is
    // stored in the team's memory as a step of its own: its history shows "Step t:" with no query and
    // no information, one of the history_length steps of the window. {history} shows it so; the
    // {information} blocks have nothing to show.
    private void unanswered(State st) {
        st.count(UNANSWERED);
        emptyStep(st);
    }

    // the reference's memory record of a step whose action was empty: "Step t:", in the window
    private void emptyStep(State st) {
        st.steps.addLast("Step " + (st.turn + 1) + ":");
        while (st.steps.size() > options.historyLength()) st.steps.removeFirst();
    }

    // one batched tool call for the searchers' well-formed queries; a reply without a query searches
    // nothing. With retry_unanswered (the reference mode) as the reference's environment: a reply
    // without a search tag is an empty step of {history}, and an empty tag searches the empty query
    // (its projection keeps "<search></search>" and its tool sends "" to the server); both stay
    // invalid actions in drmas, as an empty answer does
    private void search(List<State> states, List<Integer> searching, List<Turn> replies) {
        List<String> queries = new ArrayList<>();
        List<State> asking = new ArrayList<>();
        for (int j = 0; j < searching.size(); j++) {
            String text = replies.get(j).text();
            String q;
            if (options.retryUnanswered()) {
                String tag = SEARCH_TAG.last(text);
                if (tag == null) {
                    emptyStep(states.get(searching.get(j)));
                    continue;
                }
                q = tag.strip();
            } else {
                Optional<String> given = query(text);
                if (given.isEmpty()) continue;
                q = given.get();
            }
            queries.add(q);
            asking.add(states.get(searching.get(j)));
        }
        if (queries.isEmpty()) return;
        List<SearchTool.Result> results = tool.search(List.copyOf(queries));
        if (results == null || results.size() != queries.size()) {
            throw new IllegalStateException("search tool returned " + (results == null ? "null" : results.size() + " results")
                    + " for " + queries.size() + " queries");
        }
        for (int j = 0; j < asking.size(); j++) {
            State st = asking.get(j);
            SearchTool.Result r = results.get(j);
            st.count(TOOL_CALLS);
            if (r.failed()) st.count(TOOL_FAILURES);
            String block = "<information>" + r.information() + "</information>";
            st.history.addLast(block);
            st.steps.addLast("Step " + (st.turn + 1) + ": <search>" + queries.get(j) + "</search> " + block);
            while (st.history.size() > options.historyLength()) st.history.removeFirst();
            while (st.steps.size() > options.historyLength()) st.steps.removeFirst();
        }
    }

    // one batched policy call for `agent` over some episodes; its follow-up template (if any) once
    // it has acted in the episode
    private static List<Turn> call(Agent agent, List<State> states, List<Integer> which, int turn, AgentPolicy policy) {
        return RunningEpisode.call(agent, states, which, turn, policy, st -> agent.conversation(st.hasActed(agent), st.values()));
    }
}
