// TurnRequest.java — one conversation an agent must continue, with the identity of the episode
// and turn it belongs to, so that a policy can key its random draws on (uid, traj, turn) and
// results do not depend on which other episodes share the batch.
package dev.drmas.agent;

import java.util.List;

/**
 * @param episode  position of the episode in the list given to {@link Orchestra#run}
 * @param uid      the episode's group (task) id
 * @param traj     the episode's trajectory id
 * @param turn     index of this turn among the episode's turns (0, 1, 2, ...)
 * @param loop     the workflow round it is asked in
 * @param messages the prompt: system message (if any) and user message
 */
public record TurnRequest(int episode, int uid, int traj, int turn, int loop, List<Message> messages) {
    public TurnRequest {
        messages = List.copyOf(messages);
    }
}
