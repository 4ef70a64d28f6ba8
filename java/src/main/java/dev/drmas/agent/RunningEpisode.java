// RunningEpisode.java — what every orchestra keeps of an episode while it runs (its start, its steps
// so far, its counters, its action) and the one batched policy call that all of them make: ask an
// agent for a turn in each of some episodes, check what the policy returned, record each turn as a
// step of its episode. Orchestras extend it with their own state (math: the latest answer and
// verdict; search: the information history).
package dev.drmas.agent;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

public class RunningEpisode {
    private final EpisodeInit init;
    private final List<Step> steps = new ArrayList<>();
    private final Map<String, Integer> counters = new LinkedHashMap<>();
    /** The text the environment scores; "" until the workflow sets it. */
    public String action = "";
    /** Whether the episode ended by a verifier's approval. */
    public boolean approved;
    /** Whether the episode takes no more turns. */
    public boolean done;

    public RunningEpisode(EpisodeInit init) {
        this.init = init;
    }

    public EpisodeInit init() {
        return init;
    }

    public List<Step> steps() {
        return steps;
    }

    /** Adds one to counter {@code name}. */
    public void count(String name) {
        counters.merge(name, 1, Integer::sum);
    }

    /**
     * A verifier's reply judged: its verdict by {@code parser}, counted under the shared names of
     * {@link Episode}, and returned as the workflow takes it (a malformed reply as {@code malformedAs}).
     */
    public Verdict judge(VerdictParser parser, String reply, Verdict malformedAs) {
        Verdict v = java.util.Objects.requireNonNull(parser.parse(reply), "verdict parser returned null");
        count(switch (v) {
            case APPROVE -> Episode.APPROVALS;
            case REJECT -> Episode.REJECTIONS;
            case MALFORMED -> Episode.MALFORMED_VERDICTS;
        });
        return v == Verdict.MALFORMED ? malformedAs : v;
    }

    /** Whether {@code agent} has taken a turn in this episode already. */
    public boolean hasActed(Agent agent) {
        for (Step s : steps) if (s.agent() == agent.index()) return true;
        return false;
    }

    /** The finished episode. */
    public Episode finish() {
        return new Episode(init.uid(), init.traj(), init.question(), init.answer(), steps, action, approved, counters);
    }

    /**
     * One batched policy call: a turn of {@code agent} in each episode {@code states.get(i)} for i in
     * {@code which}, in that order, with the prompt {@code prompt} builds for it; each turn is
     * recorded as a step (its validity checked by the agent) and the turns are returned in order.
     */
    public static <S extends RunningEpisode> List<Turn> call(Agent agent, List<S> states, List<Integer> which, int loop,
                                                            AgentPolicy policy, Function<S, List<Message>> prompt) {
        // a turn's index is its episode's step count before the call: the same episode twice would
        // give both requests one turn, hence one sampling stream and the same sample
        java.util.Set<Integer> seen = new java.util.HashSet<>();
        for (int e : which) {
            if (!seen.add(e)) {
                throw new IllegalArgumentException("agent '" + agent.id() + "': episode " + e + " (task uid " + states.get(e).init().uid()
                        + ", trajectory " + states.get(e).init().traj() + ") is asked twice in one call " + which
                        + "; ask for its next turn in a later call");
            }
        }
        List<TurnRequest> requests = requests(states, which, loop, prompt);
        return record(agent, states, requests, policy.act(agent, requests));
    }

    /**
     * The turns of several agents in one policy call ({@link AgentPolicy#actTogether}): agent i in
     * the episodes {@code which.get(i)} with the prompts {@code prompts.get(i)} builds, each episode
     * in at most one of the lists; recorded and returned as {@link #call} does, agent by agent.
     */
    public static <S extends RunningEpisode> List<List<Turn>> callTogether(List<Agent> agents, List<S> states,
                                                                          List<List<Integer>> which, int loop, AgentPolicy policy,
                                                                          List<Function<S, List<Message>>> prompts) {
        if (which.size() != agents.size() || prompts.size() != agents.size()) {
            throw new IllegalArgumentException(agents.size() + " agents, " + which.size() + " episode lists, " + prompts.size() + " prompts");
        }
        java.util.Set<Integer> seen = new java.util.HashSet<>();
        for (List<Integer> w : which) {
            for (int e : w) {
                if (!seen.add(e)) throw new IllegalArgumentException("episode " + e + " is asked twice in one round of agents " + agents);
            }
        }
        List<List<TurnRequest>> requests = new ArrayList<>(agents.size());
        for (int i = 0; i < agents.size(); i++) requests.add(requests(states, which.get(i), loop, prompts.get(i)));
        List<List<Turn>> turns = policy.actTogether(List.copyOf(agents), List.copyOf(requests));
        if (turns == null || turns.size() != agents.size()) {
            throw new IllegalStateException("policy returned " + (turns == null ? "null" : turns.size() + " turn lists") + " for "
                    + agents.size() + " agents");
        }
        List<List<Turn>> out = new ArrayList<>(agents.size());
        for (int i = 0; i < agents.size(); i++) out.add(record(agents.get(i), states, requests.get(i), turns.get(i)));
        return out;
    }

    private static <S extends RunningEpisode> List<TurnRequest> requests(List<S> states, List<Integer> which, int loop,
                                                                       Function<S, List<Message>> prompt) {
        List<TurnRequest> requests = new ArrayList<>(which.size());
        for (int i : which) {
            S st = states.get(i);
            requests.add(new TurnRequest(i, st.init().uid(), st.init().traj(), st.steps().size(), loop, prompt.apply(st)));
        }
        return List.copyOf(requests);
    }

    // each turn checked and recorded as a step of its episode
    private static <S extends RunningEpisode> List<Turn> record(Agent agent, List<S> states, List<TurnRequest> requests,
                                                               List<Turn> turns) {
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
            List<Step> steps = states.get(r.episode()).steps();
            steps.add(new Step(agent.index(), steps.size(), r.loop(), r.messages(), t, agent.isValid(t.text())));
        }
        return turns;
    }

    /** The indices of the episodes that are not done, in order. */
    public static List<Integer> active(List<? extends RunningEpisode> states) {
        List<Integer> out = new ArrayList<>();
        for (int i = 0; i < states.size(); i++) if (!states.get(i).done) out.add(i);
        return out;
    }
}
