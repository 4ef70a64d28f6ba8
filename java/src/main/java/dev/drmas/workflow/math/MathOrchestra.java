// MathOrchestra.java — the solver–verifier workflow of the Dr. MAS reference code: up to
// max_loops rounds of solver then verifier, the verifier skipped in the last round; approved
// episodes stop, rejected ones get another solver turn; the action is the solver's latest answer.
// Counters: the verifier's verdicts (Episode.APPROVALS, ...) and the rounds (Episode.ROUNDS).
package dev.drmas.workflow.math;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.RunningEpisode;
import dev.drmas.agent.Team;
import dev.drmas.agent.Turn;
import dev.drmas.agent.Verdict;
import dev.drmas.agent.VerdictParser;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * Agents' user templates are filled from the team context of their episode:
 * {@code {question}}; {@code {answer}} the solver's latest answer; {@code {feedback}} the
 * verifier's latest reply; {@code {verdict}} what the team took it as ("approve" or "reject",
 * so a malformed reply shows as the verdict it counted as); {@code {context}} every output so
 * far, one "agent: text" line each. Which of these exist depends on the turn, and templates are
 * checked against that when the workflow is built.
 */
public final class MathOrchestra implements Orchestra {
    public static final String NAME = "math";

    /**
     * @param maxLoops    rounds of solver (then verifier, except in the last round); ≥ 1
     * @param malformedAs what a reply without a verdict counts as: APPROVE (reference) or REJECT
     * @param solver      id of the solver agent in the team
     * @param verifier    id of the verifier agent (not needed when maxLoops is 1)
     */
    public record Options(int maxLoops, Verdict malformedAs, String solver, String verifier) {
        public static final Options DEFAULTS = new Options(2, Verdict.APPROVE, MathAgents.SOLVER, MathAgents.VERIFIER);

        public Options {
            if (maxLoops < 1) throw new IllegalArgumentException("orchestra 'math': max_loops = " + maxLoops + " must be >= 1");
            if (malformedAs == Verdict.MALFORMED || malformedAs == null) {
                throw new IllegalArgumentException("orchestra 'math': malformed_as must be approve or reject");
            }
            Objects.requireNonNull(solver, "solver");
            Objects.requireNonNull(verifier, "verifier");
        }

        public Options withMaxLoops(int n) {
            return new Options(n, malformedAs, solver, verifier);
        }

        public Options withMalformedAs(Verdict v) {
            return new Options(maxLoops, v, solver, verifier);
        }
    }

    static final String Q = "question", ANSWER = "answer", FEEDBACK = "feedback", VERDICT = "verdict", CONTEXT = "context";
    private static final Set<String> ALL = Set.of(Q, ANSWER, FEEDBACK, VERDICT, CONTEXT);

    private final Team team;
    private final Options options;
    private final VerdictParser parser;
    private final Agent solver;
    private final Agent verifier;  // null when maxLoops == 1 and the team has none

    public MathOrchestra(Team team, Options options, VerdictParser parser) {
        this.team = Objects.requireNonNull(team, "team");
        this.options = Objects.requireNonNull(options, "options");
        this.parser = Objects.requireNonNull(parser, "parser");
        if (!team.has(options.solver())) {
            throw new IllegalArgumentException("orchestra 'math' needs a solver agent '" + options.solver()
                    + "'; the team has: " + ids(team.agents()));
        }
        this.solver = team.agent(options.solver());
        if (team.has(options.verifier())) {
            this.verifier = team.agent(options.verifier());
        } else if (options.maxLoops() > 1) {
            throw new IllegalArgumentException("orchestra 'math' with max_loops = " + options.maxLoops()
                    + " needs a verifier agent '" + options.verifier() + "'; the team has: " + ids(team.agents())
                    + " (use max_loops = 1 for a solver alone)");
        } else {
            this.verifier = null;
        }
        // an agent the workflow never calls would be a model that never trains: a config mistake
        for (Agent a : team.agents()) {
            if (a != solver && a != verifier) {
                throw new IllegalArgumentException("orchestra 'math' calls only '" + options.solver() + "' and '"
                        + options.verifier() + "', but the team also has agent '" + a.id() + "'");
            }
        }
        solver.requirePlaceholders("orchestra 'math'", Set.of(Q, CONTEXT), ALL);
        if (verifier != null) verifier.requirePlaceholders("orchestra 'math'", Set.of(Q, ANSWER, CONTEXT), ALL);
    }

    /** The reference options with math's own verdict parser. */
    public MathOrchestra(Team team) {
        this(team, Options.DEFAULTS, MathReward::parseVerdict);
    }

    @Override
    public Team team() {
        return team;
    }

    public Options options() {
        return options;
    }

    /** One episode's state while the workflow runs. */
    private static final class State extends RunningEpisode {
        final StringBuilder context = new StringBuilder();
        String answer, feedback, verdict;

        State(EpisodeInit init) {
            super(init);
        }

        Map<String, String> values() {
            Map<String, String> v = new HashMap<>();
            v.put(Q, init().question());
            v.put(CONTEXT, context.toString());
            if (answer != null) v.put(ANSWER, answer);
            if (feedback != null) v.put(FEEDBACK, feedback);
            if (verdict != null) v.put(VERDICT, verdict);
            return v;
        }
    }

    @Override
    public List<Episode> run(List<EpisodeInit> episodes, AgentPolicy policy) {
        List<State> states = new ArrayList<>(episodes.size());
        for (EpisodeInit e : episodes) states.add(new State(e));
        for (int loop = 0; loop < options.maxLoops(); loop++) {
            List<Integer> active = RunningEpisode.active(states);
            if (active.isEmpty()) break;

            List<Turn> answers = call(solver, states, active, loop, policy);
            for (int j = 0; j < active.size(); j++) {
                State st = states.get(active.get(j));
                st.answer = answers.get(j).text();
                st.count(Episode.ROUNDS);
            }
            if (loop == options.maxLoops() - 1) break;  // the last answer is final: no verifier

            List<Turn> replies = call(verifier, states, active, loop, policy);
            for (int j = 0; j < active.size(); j++) {
                State st = states.get(active.get(j));
                String reply = replies.get(j).text();
                Verdict taken = st.judge(parser, reply, options.malformedAs());
                st.feedback = reply;
                st.verdict = taken.word();
                st.approved = st.done = taken == Verdict.APPROVE;
            }
        }
        List<Episode> out = new ArrayList<>(states.size());
        for (State st : states) {
            st.action = st.answer;
            out.add(st.finish());
        }
        return out;
    }

    // one batched policy call for `agent` over the active episodes; each output joins the context
    private static List<Turn> call(Agent agent, List<State> states, List<Integer> active, int loop, AgentPolicy policy) {
        List<Turn> turns = RunningEpisode.call(agent, states, active, loop, policy,
                st -> agent.conversation(st.hasActed(agent), st.values()));
        for (int j = 0; j < turns.size(); j++) {
            StringBuilder context = states.get(active.get(j)).context;
            if (!context.isEmpty()) context.append('\n');
            context.append(agent.id()).append(": ").append(turns.get(j).text());
        }
        return turns;
    }

    private static String ids(List<Agent> agents) {
        return String.join(", ", agents.stream().map(Agent::id).toList());
    }
}
