// ProposerOrchestra.java — a fan-out topology: P proposer calls each answer the math task on their
// own (call i by proposer agent i mod M, so one model or several), then the aggregator reads every
// proposal and writes the final \boxed{} answer, which is the episode's action. Agents act a
// different number of times per trajectory (a proposer P/M times, the aggregator once), which is
// what per-agent normalisation has to handle.
package dev.drmas.workflow.proposer;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.RunningEpisode;
import dev.drmas.agent.Team;
import dev.drmas.agent.Turn;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Templates: proposers see {@code {question}}; the aggregator also sees {@code {proposals}}, one
 * line "P1: text" per proposal in call order.
 */
public final class ProposerOrchestra implements Orchestra {
    static final String Q = "question", PROPOSALS = "proposals";

    private final Team team;
    private final List<Agent> proposers;
    private final Agent aggregator;
    private final int calls;

    /** @param calls proposer calls per episode, &gt;= the number of proposer agents */
    public ProposerOrchestra(Team team, List<String> proposerIds, String aggregatorId, int calls) {
        this.team = team;
        if (proposerIds.isEmpty()) throw new IllegalArgumentException("orchestra 'proposer-aggregator' needs a proposer agent");
        this.proposers = proposerIds.stream().map(team::agent).toList();
        this.aggregator = team.agent(aggregatorId);
        if (calls < proposers.size()) {
            // an agent the workflow never calls would be a model that never trains: a config mistake
            throw new IllegalArgumentException("orchestra.options.proposers: " + calls + " proposer calls, but " + proposers.size()
                    + " agents have role proposer; each needs at least one call");
        }
        this.calls = calls;
        for (Agent p : proposers) p.requirePlaceholders("orchestra 'proposer-aggregator'", Set.of(Q), Set.of(Q));
        aggregator.requirePlaceholders("orchestra 'proposer-aggregator'", Set.of(Q, PROPOSALS), Set.of(Q, PROPOSALS));
    }

    @Override
    public Team team() {
        return team;
    }

    /** The agent that makes proposal {@code i}. */
    Agent proposer(int i) {
        return proposers.get(i % proposers.size());
    }

    int calls() {
        return calls;
    }

    String aggregatorId() {
        return aggregator.id();
    }

    private static final class State extends RunningEpisode {
        final List<String> proposals = new ArrayList<>();

        State(EpisodeInit init) {
            super(init);
        }
    }

    @Override
    public List<Episode> run(List<EpisodeInit> episodes, AgentPolicy policy) {
        List<State> states = new ArrayList<>(episodes.size());
        for (EpisodeInit e : episodes) states.add(new State(e));
        List<Integer> all = RunningEpisode.active(states);
        for (int i = 0; i < calls; i++) {
            Agent p = proposer(i);
            List<Turn> turns = RunningEpisode.call(p, states, all, i, policy, st -> p.conversation(st.hasActed(p), Map.of(Q, st.init().question())));
            for (int e = 0; e < turns.size(); e++) states.get(e).proposals.add(turns.get(e).text());
        }
        List<Turn> finals = RunningEpisode.call(aggregator, states, all, calls, policy,
                st -> aggregator.conversation(st.hasActed(aggregator), Map.of(Q, st.init().question(), PROPOSALS, lines(st.proposals))));
        List<Episode> out = new ArrayList<>(states.size());
        for (int e = 0; e < states.size(); e++) {
            states.get(e).action = finals.get(e).text();
            out.add(states.get(e).finish());
        }
        return out;
    }

    static String lines(List<String> proposals) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < proposals.size(); i++) sb.append(i == 0 ? "" : "\n").append('P').append(i + 1).append(": ").append(proposals.get(i));
        return sb.toString();
    }
}
