// MathOrchestra.java — the solver–verifier workflow of the Dr. MAS reference code: up to
// max_loops rounds of solver then verifier, the verifier skipped in the last round; approved
// episodes stop, rejected ones get another solver turn; the action is the solver's latest answer.
package dev.drmas.agent;

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
        public static final Options DEFAULTS = new Options(2, Verdict.APPROVE, Agent.SOLVER, Agent.VERIFIER);

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

    public MathOrchestra(Team team) {
        this(team, Options.DEFAULTS, VerdictParser.verifyTag());
    }

    /** The registry's factory: options max_loops, malformed_as (approve|reject), solver, verifier. */
    public static MathOrchestra fromSettings(OrchestraSettings s) {
        s.requireKnown(NAME, Set.of("max_loops", "malformed_as", "solver", "verifier"));
        Options d = Options.DEFAULTS;
        String malformed = s.stringOption(NAME, "malformed_as", d.malformedAs().word());
        Verdict malformedAs = switch (malformed.toLowerCase(java.util.Locale.ROOT)) {
            case "approve" -> Verdict.APPROVE;
            case "reject" -> Verdict.REJECT;
            default -> throw new IllegalArgumentException("orchestra 'math': option 'malformed_as' = '" + malformed
                    + "' is not one of approve, reject");
        };
        Options o = new Options(s.intOption(NAME, "max_loops", d.maxLoops()), malformedAs,
                s.stringOption(NAME, "solver", d.solver()), s.stringOption(NAME, "verifier", d.verifier()));
        return new MathOrchestra(s.team(), o, VerdictParser.verifyTag());
    }

    @Override
    public Team team() {
        return team;
    }

    public Options options() {
        return options;
    }

    /** One episode's state while the workflow runs. */
    private static final class State {
        final EpisodeInit init;
        final List<Step> steps = new ArrayList<>();
        final StringBuilder context = new StringBuilder();
        String answer, feedback, verdict;
        boolean approved;
        int approvals, rejections, malformed, loops;

        State(EpisodeInit init) {
            this.init = init;
        }

        boolean hasActed(Agent a) {
            for (Step s : steps) if (s.agent() == a.index()) return true;
            return false;
        }

        Map<String, String> values() {
            Map<String, String> v = new HashMap<>();
            v.put(Q, init.question());
            v.put(CONTEXT, context.toString());
            if (answer != null) v.put(ANSWER, answer);
            if (feedback != null) v.put(FEEDBACK, feedback);
            if (verdict != null) v.put(VERDICT, verdict);
            return v;
        }

        void record(Agent a, int loop, List<Message> prompt, Turn t) {
            steps.add(new Step(a.index(), steps.size(), loop, prompt, t, a.isValid(t.text())));
            if (!context.isEmpty()) context.append('\n');
            context.append(a.id()).append(": ").append(t.text());
        }
    }

    @Override
    public List<Episode> run(List<EpisodeInit> episodes, AgentPolicy policy) {
        List<State> states = new ArrayList<>(episodes.size());
        for (EpisodeInit e : episodes) states.add(new State(e));
        for (int loop = 0; loop < options.maxLoops(); loop++) {
            List<Integer> active = new ArrayList<>();
            for (int i = 0; i < states.size(); i++) if (!states.get(i).approved) active.add(i);
            if (active.isEmpty()) break;

            List<Turn> answers = call(solver, states, active, loop, policy);
            for (int j = 0; j < active.size(); j++) {
                State st = states.get(active.get(j));
                st.answer = answers.get(j).text();
                st.loops++;
            }
            if (loop == options.maxLoops() - 1) break;  // the last answer is final: no verifier

            List<Turn> replies = call(verifier, states, active, loop, policy);
            for (int j = 0; j < active.size(); j++) {
                State st = states.get(active.get(j));
                String reply = replies.get(j).text();
                Verdict v = Objects.requireNonNull(parser.parse(reply), "verdict parser returned null");
                switch (v) {
                    case APPROVE -> st.approvals++;
                    case REJECT -> st.rejections++;
                    case MALFORMED -> st.malformed++;
                }
                Verdict taken = v == Verdict.MALFORMED ? options.malformedAs() : v;
                st.feedback = reply;
                st.verdict = taken.word();
                st.approved = taken == Verdict.APPROVE;
            }
        }
        List<Episode> out = new ArrayList<>(states.size());
        for (State st : states) {
            EpisodeInit e = st.init;
            out.add(new Episode(e.uid(), e.traj(), e.question(), e.answer(), st.steps, st.answer, st.approved,
                    st.approvals, st.rejections, st.malformed, st.loops));
        }
        return out;
    }

    // one batched policy call for `agent` over the active episodes, recorded in each episode
    private static List<Turn> call(Agent agent, List<State> states, List<Integer> active, int loop, AgentPolicy policy) {
        List<TurnRequest> requests = new ArrayList<>(active.size());
        for (int i : active) {
            State st = states.get(i);
            List<Message> prompt = agent.conversation(st.hasActed(agent), st.values());
            requests.add(new TurnRequest(i, st.init.uid(), st.init.traj(), st.steps.size(), loop, prompt));
        }
        List<Turn> turns = policy.act(agent, List.copyOf(requests));
        if (turns == null || turns.size() != requests.size()) {
            throw new IllegalStateException("policy returned " + (turns == null ? "null" : turns.size() + " turns")
                    + " for " + requests.size() + " requests of agent '" + agent.id() + "'");
        }
        for (int j = 0; j < turns.size(); j++) {
            Turn t = turns.get(j);
            if (t == null) {
                throw new IllegalStateException("policy returned no turn for request " + j + " of agent '" + agent.id() + "'");
            }
            TurnRequest r = requests.get(j);
            states.get(r.episode()).record(agent, loop, r.messages(), t);
        }
        return turns;
    }

    private static String ids(List<Agent> agents) {
        return String.join(", ", agents.stream().map(Agent::id).toList());
    }
}
