// ReplyFormat.java — the format checks of an agent's reply that the Dr. MAS reference adds to its
// tag checks (agent_system/agent/utils.py, general_projection), for the workflows' options that turn
// them on: one <think>…</think> block, and no Chinese character. A reply that fails one is an invalid
// action (it takes the invalid-action penalty); what the workflow does with it is unchanged.
package dev.drmas.workflow;

import dev.drmas.agent.Agent;
import dev.drmas.agent.Team;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import java.util.function.Predicate;

public final class ReplyFormat {
    private ReplyFormat() {
    }

    static final String THINK = "<think>", END_THINK = "</think>";

    /**
     * Whether {@code text} has exactly one {@code <think>} and exactly one {@code </think>}, the end
     * after the start: the reference's check_think_tag, the tags as literal, case-sensitive strings.
     */
    public static boolean oneThinkBlock(String text) {
        if (text == null) return false;
        int start = text.indexOf(THINK), end = text.indexOf(END_THINK);
        return start >= 0 && end > start && text.indexOf(THINK, start + 1) < 0 && text.indexOf(END_THINK, end + 1) < 0;
    }

    /**
     * Whether {@code text} contains a character in U+4E00–U+9FFF (CJK Unified Ideographs), the
     * reference's {@code re.search(r'[\u4e00-\u9fff]', ...)}: a model drifting into Chinese. Every
     * code point of that range is one Java char, and no surrogate falls in it.
     */
    public static boolean hasCjk(String text) {
        if (text == null) return false;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c >= '\u4e00' && c <= '\u9fff') return true;
        }
        return false;
    }

    /** The check of a reply's format: one think block when {@code requireThink}, no CJK when {@code rejectCjk}; null when neither. */
    public static Predicate<String> check(boolean requireThink, boolean rejectCjk) {
        if (!requireThink && !rejectCjk) return null;
        return text -> (!requireThink || oneThinkBlock(text)) && (!rejectCjk || !hasCjk(text));
    }

    /**
     * {@code team} with each agent's validity narrowed by {@code extra.apply(agent)} (a reply is
     * valid when the agent's own check and that one pass); a null check leaves the agent as it is.
     */
    public static Team narrowed(Team team, Function<Agent, Predicate<String>> extra) {
        List<Agent> agents = new ArrayList<>(team.size());
        for (Agent a : team.agents()) {
            Predicate<String> also = extra.apply(a);
            agents.add(also == null ? a : a.withValidity(text -> a.isValid(text) && also.test(text)));
        }
        return new Team(agents);
    }
}
