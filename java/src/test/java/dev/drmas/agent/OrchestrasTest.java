// OrchestrasTest.java — the registry of workflows by name and the math workflow's options as a
// config gives them: defaults, typed parsing, and errors that name the key and the choices.
package dev.drmas.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class OrchestrasTest {
    static final Team TEAM = new Team(List.of(Agent.solver(0, "m"), Agent.verifier(1, "m")));

    /** A second workflow: every agent once, in index order — registered without touching anything else. */
    record EachOnce(Team team) implements Orchestra {
        @Override
        public List<Episode> run(List<EpisodeInit> episodes, AgentPolicy policy) {
            return List.of();
        }
    }

    static {
        Orchestras.register("test-each-once", s -> new EachOnce(s.team()));
    }

    static String error(Runnable r) {
        return assertThrows(IllegalArgumentException.class, r::run).getMessage();
    }

    @Test
    void registeredWorkflowsAreBuiltByName() {
        Orchestra o = Orchestras.create("test-each-once", new OrchestraSettings(TEAM));
        assertInstanceOf(EachOnce.class, o);
        assertSame(TEAM, o.team());
        MathOrchestra m = assertInstanceOf(MathOrchestra.class, Orchestras.create("math", new OrchestraSettings(TEAM)));
        assertEquals(MathOrchestra.Options.DEFAULTS, m.options());
    }

    @Test
    void unknownNameListsTheRegisteredOnes() {
        String msg = error(() -> Orchestras.create("search", new OrchestraSettings(TEAM)));
        assertTrue(msg.startsWith("unknown orchestra 'search'; registered: "), msg);
        assertTrue(msg.contains("math") && msg.contains("test-each-once"), msg);
    }

    @Test
    void aNameIsRegisteredOnce() {
        String msg = error(() -> Orchestras.register("math", MathOrchestra::fromSettings));
        assertTrue(msg.contains("'math' is already registered"), msg);
    }

    @Test
    void mathOptionsAreParsedFromConfigValues() {
        MathOrchestra m = (MathOrchestra) Orchestras.create("math",
                new OrchestraSettings(TEAM, Map.of("max_loops", 3L, "malformed_as", "Reject")));
        assertEquals(new MathOrchestra.Options(3, Verdict.REJECT, "solver", "verifier"), m.options());
        m = (MathOrchestra) Orchestras.create("math", new OrchestraSettings(TEAM, Map.of("max_loops", "1")));
        assertEquals(1, m.options().maxLoops());
    }

    @Test
    void badMathOptionsNameTheKey() {
        String msg = error(() -> Orchestras.create("math", new OrchestraSettings(TEAM, Map.of("max_loop", 3))));
        assertTrue(msg.contains("orchestra 'math': unknown option 'max_loop'; valid options: malformed_as, max_loops, solver, verifier"), msg);
        msg = error(() -> Orchestras.create("math", new OrchestraSettings(TEAM, Map.of("max_loops", "two"))));
        assertTrue(msg.contains("option 'max_loops' = 'two' is not an integer"), msg);
        msg = error(() -> Orchestras.create("math", new OrchestraSettings(TEAM, Map.of("max_loops", 0))));
        assertTrue(msg.contains("max_loops = 0 must be >= 1"), msg);
        msg = error(() -> Orchestras.create("math", new OrchestraSettings(TEAM, Map.of("malformed_as", "ignore"))));
        assertTrue(msg.contains("option 'malformed_as' = 'ignore' is not one of approve, reject"), msg);
        msg = error(() -> Orchestras.create("math", new OrchestraSettings(TEAM, Map.of("solver", "author"))));
        assertTrue(msg.contains("needs a solver agent 'author'; the team has: solver, verifier"), msg);
    }
}
