// Orchestra.java — a multi-agent workflow over a batch of episodes: the agents' turns in its order,
// batched per agent. The trainer only calls run(); each workflow (dev.drmas.workflow.*) has one.
package dev.drmas.agent;

import java.util.List;

public interface Orchestra {
    /** The team whose agents the workflow calls. */
    Team team();

    /**
     * Runs every episode to its end, asking {@code policy} for the agents' turns (batched: one
     * call per agent per round) and returns the episodes in the order given.
     */
    List<Episode> run(List<EpisodeInit> episodes, AgentPolicy policy);
}
