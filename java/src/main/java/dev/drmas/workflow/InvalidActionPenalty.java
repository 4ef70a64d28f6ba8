// InvalidActionPenalty.java — the score of a training row, the reference code's rule for every
// workflow: the episode reward of its trajectory, minus the invalid-action penalty when that row's
// own output was malformed (a solver without a box, a verifier without a verdict, ...).
package dev.drmas.workflow;

/** @param penalty subtracted from the score of each malformed row; finite and &gt;= 0 */
public record InvalidActionPenalty(double penalty) {
    public InvalidActionPenalty {
        if (!Double.isFinite(penalty) || penalty < 0) {
            throw new IllegalArgumentException("invalid_penalty must be a finite number >= 0, got " + penalty);
        }
    }

    /**
     * {@code episodeReward} for a valid row, {@code episodeReward − penalty} for a malformed one. The
     * penalty is not clipped at 0, so a malformed turn of a failed episode scores −penalty, below
     * every well-formed one.
     */
    public double rowScore(double episodeReward, boolean valid) {
        if (!Double.isFinite(episodeReward)) throw new IllegalArgumentException("episode reward is not finite: " + episodeReward);
        return valid ? episodeReward : episodeReward - penalty;
    }
}
