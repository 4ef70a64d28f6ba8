// AgentPromptsTest.java — agents[i].prompts in a run's config: the team a workflow builds through
// Roles gets the config's system message and templates in place of its role's, the orchestra fills
// them (the math workflow's {context} included), a user template alone serves every turn, a
// follow-up alone keeps the role's first-turn template, a placeholder typo fails when the workflow
// opens naming the key path, and the prompts survive the config's round trip through config.yaml
// (what a resume compares), awkward characters (U+2028, tabs, a trailing newline) included.
package dev.drmas.workflow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Message;
import dev.drmas.agent.Turn;
import dev.drmas.config.AgentPrompts;
import dev.drmas.config.RunConfig;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.util.List;
import org.junit.jupiter.api.Test;

class AgentPromptsTest {
    static final String YAML = """
            orchestra: {name: math, options: {max_loops: 2}}
            agents:
              - id: solver
                prompts:
                  system: You are a helpful assistant.
                  user: |
                    The team's problem: {question}
                    # Teammates
                    {context}
                    # Role
                    Solve it; the answer in \\boxed{}.
              - id: verifier
                prompts: {system: "", user: "Problem: {question}\\nTeam: {context}\\nJudge the latest answer."}
            """;

    private static Workload open(String yaml, String... overrides) {
        return Workflows.open(RunConfig.parse(yaml, List.of(overrides)), new PrintStream(new ByteArrayOutputStream()));
    }

    @Test
    void theConfigsPromptsReplaceTheRolesAndAreFilledIn() throws Exception {
        try (Workload w = open(YAML)) {
            Agent solver = w.orchestra().team().agent("solver"), verifier = w.orchestra().team().agent("verifier");
            assertEquals("You are a helpful assistant.", solver.systemPrompt());
            assertNull(solver.followUpTemplate(), "a user template alone serves every turn, not the role's follow-up");
            assertEquals("", verifier.systemPrompt());
            // one rejected round: the solver's second turn sees the verifier's whole reply in {context}
            AgentPolicy policy = (agent, reqs) -> reqs.stream()
                    .map(r -> Turn.of(agent.id().equals("solver") ? "it is \\boxed{41}" : "12+30 is 42, not 41 <verify>reject</verify>"))
                    .toList();
            Episode e = w.orchestra().run(List.of(new EpisodeInit(0, 0, "12+30=?", "42")), policy).getFirst();
            assertEquals(3, e.steps().size());
            assertEquals(List.of(Message.system("You are a helpful assistant."),
                    Message.user("The team's problem: 12+30=?\n# Teammates\n\n# Role\nSolve it; the answer in \\boxed{}.\n")),
                    e.steps().get(0).prompt());
            assertEquals(List.of(Message.user("Problem: 12+30=?\nTeam: solver: it is \\boxed{41}\nJudge the latest answer.")),
                    e.steps().get(1).prompt(), "an empty system prompt sends none");
            assertEquals(Message.user("The team's problem: 12+30=?\n# Teammates\nsolver: it is \\boxed{41}\n"
                    + "verifier: 12+30 is 42, not 41 <verify>reject</verify>\n# Role\nSolve it; the answer in \\boxed{}.\n"),
                    e.steps().get(2).prompt().get(1));
        }
    }

    @Test
    void aFollowUpAloneKeepsTheRolesFirstTurnTemplate() throws Exception {
        try (Workload w = open("orchestra: {name: math}\n", "+agents=[{id: solver, prompts: {follow_up: 'Again: {question} ({verdict})'}}, {id: verifier}]")) {
            Agent solver = w.orchestra().team().agent("solver");
            Agent builtIn = dev.drmas.workflow.math.MathAgents.solver(0, "m");
            assertEquals(builtIn.userTemplate().source(), solver.userTemplate().source());
            assertEquals(builtIn.systemPrompt(), solver.systemPrompt());
            assertEquals("Again: {question} ({verdict})", solver.followUpTemplate().source());
        }
    }

    @Test
    void aPlaceholderTypoNamesTheKeyWhenTheWorkflowOpens() {
        var e = assertThrows(IllegalArgumentException.class, () -> open(YAML.replace("{question}\n", "{questoin}\n")));
        assertTrue(e.getMessage().contains("agent 'solver' user template (agents[0].prompts.user)")
                && e.getMessage().contains("uses {questoin}") && e.getMessage().contains("available: {context}, {question}"), e.getMessage());
        // the verifier's first turn has no verdict yet
        e = assertThrows(IllegalArgumentException.class, () -> open(YAML.replace("Judge the latest answer.", "{verdict}")));
        assertTrue(e.getMessage().contains("agents[1].prompts.user") && e.getMessage().contains("uses {verdict}"), e.getMessage());
    }

    @Test
    void thePromptsSurviveTheWrittenConfig() {
        RunConfig c = RunConfig.parse(YAML, List.of());
        AgentPrompts p = c.agent("solver").prompts();
        assertTrue(p.user().contains("# Teammates\n{context}\n"), p.user());
        RunConfig again = RunConfig.parse(c.toYaml(), List.of());
        assertEquals(c.agents(), again.agents());
        assertEquals(AgentPrompts.NONE, RunConfig.parse("orchestra: {name: math}\n", List.of()).agent("solver").prompts());
    }
    @Test
    void aWorkflowThatDropsTheConfigsPromptsIsAnError() throws Exception {
        // a team built without Roles (here: the workload of a config without prompts, checked against one with them)
        RunConfig with = RunConfig.parse(YAML, List.of()), without = RunConfig.parse("orchestra: {name: math, options: {max_loops: 2}}\n", List.of());
        try (Workload w = Workflows.open(without, new PrintStream(new ByteArrayOutputStream()))) {
            var e = assertThrows(IllegalArgumentException.class, () -> Workflows.requirePrompts(with, w));
            assertEquals("agents[0].prompts: workflow 'math' does not give agent 'solver' the config's prompts (a workflow applies them"
                    + " when it builds its team with dev.drmas.workflow.Roles)", e.getMessage());
        }
        try (Workload w = open(YAML)) {
            Workflows.requirePrompts(RunConfig.parse(YAML, List.of()), w);  // applied: no error
        }
    }

    /**
     * Awkward prompt text survives config.yaml too: the line breaks YAML knows beyond \n (U+2028,
     * U+2029, U+0085), which a reader folds into spaces inside quotes unless they are escaped, tabs,
     * a trailing newline, leading spaces, and what plain YAML would read as a comment or a mapping.
     */
    @Test
    void awkwardPromptTextSurvivesTheWrittenConfig() {
        for (String text : List.of("one\u2028two", "one\u2029two", "one\u0085two", "\ttabbed\tthrough", "ends with a newline\n",
                "   leading spaces", "# not a comment", "key: value", "a\u2028\n  b\u0085# c: d\t\n", "\u2028", "é ✓ 𝑥 \u00a0")) {
            RunConfig c = RunConfig.parse(YAML, List.of("agents[0].prompts.system=" + escapedYaml(text)));
            assertEquals(text, c.agent("solver").prompts().system(), "the override itself");
            String yaml = c.toYaml();
            RunConfig again = RunConfig.parse(yaml, List.of());
            assertEquals(text, again.agent("solver").prompts().system(), yaml);
            assertEquals(c, again);
        }
    }

    /** {@code s} as a double-quoted YAML scalar in ASCII, every other character a \\u escape. */
    private static String escapedYaml(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c >= 0x20 && c < 0x7f) b.append(c);
            else b.append(String.format("\\u%04x", (int) c));
        }
        return b.append('"').toString();
    }
}
