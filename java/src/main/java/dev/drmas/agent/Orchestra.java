// Orchestra.java — a multi-agent workflow over a batch of episodes. The trainer only calls run();
// a new workflow is one class implementing this, registered by name in Orchestras.
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
