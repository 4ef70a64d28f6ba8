// ScriptedPolicy.java — a test policy whose replies are deterministic functions of the agent and
// the conversation, and which logs every batched call, so that tests can check who was asked,
// with which episodes, in which order and with which prompts.
package dev.drmas.testing;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Turn;
import dev.drmas.agent.TurnRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiFunction;

public final class ScriptedPolicy implements AgentPolicy {
    /** One call: the agent and the requests it got. */
    public record Call(String agent, List<TurnRequest> requests) {
        public List<Integer> episodes() {
            return requests.stream().map(TurnRequest::episode).toList();
        }
    }

    private final BiFunction<Agent, TurnRequest, String> script;
    public final List<Call> calls = new ArrayList<>();

    public ScriptedPolicy(BiFunction<Agent, TurnRequest, String> script) {
        this.script = script;
    }

    @Override
    public List<Turn> act(Agent agent, List<TurnRequest> requests) {
        calls.add(new Call(agent.id(), requests));
        List<Turn> out = new ArrayList<>();
        for (TurnRequest r : requests) out.add(new Turn(script.apply(agent, r), "payload-" + agent.id() + "-" + r.turn()));
        return out;
    }

    /** The user message of a request. */
    public static String user(TurnRequest r) {
        return r.messages().getLast().content();
    }

    /** "Q: 12+30=?" → 42: the scripted solver and verifier know arithmetic. */
    public static int truth(String userMessage) {
        String q = userMessage.lines().findFirst().orElseThrow();
        String expr = q.substring("Q: ".length(), q.indexOf("=?"));
        String[] ab = expr.split("\\+");
        return Integer.parseInt(ab[0]) + Integer.parseInt(ab[1]);
    }

    /** The number inside the last \boxed{...} of a line "A: ..." of the user message. */
    public static int boxedAnswer(String userMessage) {
        String a = userMessage.lines().filter(l -> l.startsWith("A: ")).findFirst().orElseThrow();
        int open = a.lastIndexOf("\\boxed{") + "\\boxed{".length();
        return Integer.parseInt(a.substring(open, a.indexOf('}', open)));
    }

    public static String boxed(int n) {
        return "\\boxed{" + n + "}";
    }
}
