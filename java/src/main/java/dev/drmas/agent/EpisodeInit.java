// EpisodeInit.java — what an episode starts from: one (task, rollout) pair of the batch, with
// the group id (uid: one per task) and trajectory id (traj: one per rollout) of §5.
package dev.drmas.agent;

import java.util.Objects;

/** @param answer the ground truth, carried to the Episode for the reward; never shown to agents */
public record EpisodeInit(int uid, int traj, String question, String answer) {
    public EpisodeInit {
        Objects.requireNonNull(question, () -> "question of episode uid " + uid + " traj " + traj);
        Objects.requireNonNull(answer, () -> "answer of episode uid " + uid + " traj " + traj);
    }
}
