// RunningEpisodeTest.java — the batched policy call every orchestra makes: an episode asked twice in
// one call is an error naming the agent and the episode (both requests would carry the same turn
// index, hence one sampling stream and the same sample), as callTogether's "asked twice".
package dev.drmas.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class RunningEpisodeTest {
    static final Agent PLANNER = new Agent("planner", 0, "m", "", PromptTemplate.of("Q: {question}"), null, null);

    static List<RunningEpisode> states() {
        return List.of(new RunningEpisode(new EpisodeInit(0, 0, "q0", "a")), new RunningEpisode(new EpisodeInit(1, 1, "q1", "a")));
    }

    static AgentPolicy echo(List<TurnRequest> seen) {
        return (agent, reqs) -> {
            seen.addAll(reqs);
            List<Turn> out = new ArrayList<>();
            for (TurnRequest r : reqs) out.add(new Turn("t" + r.turn(), null));
            return out;
        };
    }

    @Test
    void anEpisodeAskedTwiceInOneCallIsAnError() {
        List<TurnRequest> seen = new ArrayList<>();
        var e = assertThrows(IllegalArgumentException.class,
                () -> RunningEpisode.call(PLANNER, states(), List.of(0, 1, 1), 0, echo(seen), st -> List.of(new Message("user", "q"))));
        assertTrue(e.getMessage().contains("agent 'planner'") && e.getMessage().contains("episode 1")
                && e.getMessage().contains("asked twice"), e.getMessage());
        assertEquals(0, seen.size(), "the policy was not called");
    }

    @Test
    void distinctEpisodesAreRecordedWithTheirTurns() {
        List<RunningEpisode> st = states();
        List<TurnRequest> seen = new ArrayList<>();
        RunningEpisode.call(PLANNER, st, List.of(1, 0), 0, echo(seen), s -> List.of(new Message("user", "q")));
        RunningEpisode.call(PLANNER, st, List.of(1), 0, echo(seen), s -> List.of(new Message("user", "q")));
        assertEquals(2, st.get(1).steps().size());
        assertEquals(List.of(0, 0, 1), seen.stream().map(TurnRequest::turn).toList());
    }
}
