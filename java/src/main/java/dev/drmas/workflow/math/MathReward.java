// MathReward.java — the scores of the math workflows: the episode reward (1 when the last box of the
// final answer equals the ground truth or one of the task's other accepted answers, else 0), the format checks of each agent's turn (a box for
// answers, a verdict tag for the verifier) and the verifier's verdict. A row's score is the reward
// minus the invalid-action penalty (dev.drmas.workflow.InvalidActionPenalty).
package dev.drmas.workflow.math;

import dev.drmas.agent.Tags;
import dev.drmas.agent.Verdict;
import dev.drmas.env.Task;
import java.util.Locale;
import java.util.Optional;
import java.util.regex.Pattern;

public final class MathReward {
    /** The reference code's invalid-action penalty. */
    public static final double DEFAULT_INVALID_PENALTY = 0.1;

    private MathReward() {
    }

    /**
     * 1.0 when the last box of the solver's final text is equivalent to {@code truth} (its last box,
     * when it is a worked solution: {@link MathAnswers#statedAnswer}), else 0.0 (no box: 0).
     */
    public static double episodeReward(String finalSolverText, String truth) {
        Optional<String> box = MathAnswers.lastBoxed(finalSolverText);
        return box.isPresent() && MathAnswers.equivalent(box.get(), MathAnswers.statedAnswer(truth)) ? 1.0 : 0.0;
    }

    /**
     * 1.0 when the last box of {@code finalText} is equivalent to any accepted answer of {@code task}
     * ({@link Task#golds}: a JSONL list answer gives several; a worked solution counts by its last box),
     * else 0.0. The reward of the math workflows.
     */
    public static double episodeReward(String finalText, Task task) {
        Optional<String> box = MathAnswers.lastBoxed(finalText);
        return box.isPresent() && task.golds().stream().anyMatch(g -> MathAnswers.equivalent(box.get(), MathAnswers.statedAnswer(g))) ? 1.0 : 0.0;
    }

    /** A solver turn is valid when it has a closed, non-empty box. */
    public static boolean solverValid(String solverText) {
        return MathAnswers.lastBoxed(solverText).filter(s -> !s.isBlank()).isPresent();
    }

    /** A verifier turn is valid when its verdict is approve or reject. */
    public static boolean verifierValid(String verifierText) {
        return parseVerdict(verifierText) != Verdict.MALFORMED;
    }

    // <verify>(.*?)</verify> across lines, case ignored, spaces allowed around the slash and the name
    static final Tags.Tag VERIFY_TAG = Tags.Tag.of("<\\s*verify\\s*>", "<\\s*/\\s*verify\\s*>", Pattern.CASE_INSENSITIVE);

    /**
     * The verdict of the last {@code <verify>...</verify>} tag whose content, trimmed and with case
     * ignored, is "approve" or "reject"; no such tag is MALFORMED. The last verdict wins because a
     * model that changes its mind states the final verdict last; a tag with other content (an empty
     * or stray one after the verdict) is passed over, as the search verifier's parser does
     * (VerdictParser.lastTag), so that it cannot turn a stated rejection into malformed.
     */
    public static Verdict parseVerdict(String verifierText) {
        if (verifierText == null) return Verdict.MALFORMED;
        String last = VERIFY_TAG.lastWhere(verifierText, c -> verdictWord(c) != null);
        return last == null ? Verdict.MALFORMED : verdictWord(last);
    }

    private static Verdict verdictWord(String content) {
        return switch (content.strip().toLowerCase(Locale.ROOT)) {
            case "approve" -> Verdict.APPROVE;
            case "reject" -> Verdict.REJECT;
            default -> null;
        };
    }
}
