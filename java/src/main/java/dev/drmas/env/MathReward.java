// MathReward.java — the scores of the math solver–verifier task: the episode reward (1 when the last
// box of the solver's final answer equals the ground truth, else 0), the format checks of each
// agent's turn, and the score of a training row, which is the episode reward minus the
// invalid-action penalty when that row's output was malformed (as the reference code does it).
package dev.drmas.env;

import dev.drmas.agent.Tags;
import java.util.Locale;
import java.util.Optional;
import java.util.regex.Pattern;

public final class MathReward {
    /** The reference code's invalid-action penalty. */
    public static final double DEFAULT_INVALID_PENALTY = 0.1;

    /** What a verifier turn says about the solver's latest answer. */
    public enum Verdict { APPROVE, REJECT, MALFORMED }

    private final double invalidPenalty;

    public MathReward() {
        this(DEFAULT_INVALID_PENALTY);
    }

    /** @param invalidPenalty subtracted from the score of each malformed row; finite and ≥ 0 */
    public MathReward(double invalidPenalty) {
        if (!Double.isFinite(invalidPenalty) || invalidPenalty < 0) {
            throw new IllegalArgumentException("invalid_penalty must be a finite number >= 0, got " + invalidPenalty);
        }
        this.invalidPenalty = invalidPenalty;
    }

    public double invalidPenalty() {
        return invalidPenalty;
    }

    /** 1.0 when the last box of the solver's final text is equivalent to {@code truth}, else 0.0 (no box: 0). */
    public static double episodeReward(String finalSolverText, String truth) {
        Optional<String> box = MathAnswers.lastBoxed(finalSolverText);
        return box.isPresent() && MathAnswers.equivalent(box.get(), truth) ? 1.0 : 0.0;
    }

    /**
     * The score of one row (one agent turn) of an episode: {@code episodeReward} for a valid turn,
     * {@code episodeReward − invalidPenalty} for a malformed one. The penalty is not clipped at 0,
     * so a malformed turn of a failed episode scores −penalty, below every well-formed one.
     */
    public double rowScore(double episodeReward, boolean valid) {
        if (!Double.isFinite(episodeReward)) throw new IllegalArgumentException("episode reward is not finite: " + episodeReward);
        return valid ? episodeReward : episodeReward - invalidPenalty;
    }

    /** A solver turn is valid when it has a closed, non-empty box. */
    public static boolean solverValid(String solverText) {
        return MathAnswers.lastBoxed(solverText).filter(s -> !s.isBlank()).isPresent();
    }

    /** A verifier turn is valid when its verdict is approve or reject. */
    public static boolean verifierValid(String verifierText) {
        return parseVerdict(verifierText) != Verdict.MALFORMED;
    }

    private static final Pattern VERIFY_TAG =
            Pattern.compile("<\\s*verify\\s*>(.*?)<\\s*/\\s*verify\\s*>", Pattern.CASE_INSENSITIVE | Pattern.DOTALL);

    /**
     * The verdict of the last {@code <verify>...</verify>} tag: its content, trimmed and with case
     * ignored, must be "approve" or "reject"; no tag, or a last tag with other content, is
     * MALFORMED. The last tag wins because a model that changes its mind states the final
     * verdict last.
     */
    public static Verdict parseVerdict(String verifierText) {
        if (verifierText == null) return Verdict.MALFORMED;
        String last = Tags.last(VERIFY_TAG, verifierText);
        if (last == null) return Verdict.MALFORMED;
        return switch (last.strip().toLowerCase(Locale.ROOT)) {
            case "approve" -> Verdict.APPROVE;
            case "reject" -> Verdict.REJECT;
            default -> Verdict.MALFORMED;
        };
    }
}
