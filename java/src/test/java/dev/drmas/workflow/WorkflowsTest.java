// WorkflowsTest.java — the one registry: built-in workflows and a workflow that only this test class
// path registers (EchoWorkflow, through META-INF/services as a user's jar would) are found by name;
// unknown names list the known ones; each workflow's orchestra.options and data.synthetic are bound
// to its own records with key paths and file:line, defaulted, overridable and written back in full;
// a workflow without a generator needs JSONL data; and the test-only workflow trains end to end
// through the unchanged trainer.
package dev.drmas.workflow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.config.ConfigException;
import dev.drmas.config.OrchestraConfig;
import dev.drmas.config.RoleSpec;
import dev.drmas.config.RunConfig;
import dev.drmas.train.Trainer;
import dev.drmas.workflow.math.ArithmeticData;
import dev.drmas.workflow.math.MathOptions;
import dev.drmas.workflow.proposer.ProposerOptions;
import dev.drmas.workflow.search.KnowledgeBaseData;
import dev.drmas.workflow.search.SearchOptions;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WorkflowsTest {
    @TempDir
    Path tmp;

    static String error(String yaml, String... overrides) {
        return assertThrows(ConfigException.class, () -> RunConfig.parse(yaml, List.of(overrides))).getMessage();
    }

    @Test
    void builtInAndClassPathWorkflowsAreFoundByName() {
        assertTrue(Workflows.names().containsAll(List.of("math", "search", EchoWorkflow.NAME)), Workflows.names().toString());
        assertInstanceOf(EchoWorkflow.class, Workflows.named(EchoWorkflow.NAME));
        var e = assertThrows(IllegalArgumentException.class, () -> Workflows.named("maths"));
        assertTrue(e.getMessage().startsWith("orchestra.name: unknown workflow 'maths' (did you mean math?); known workflows: "),
                e.getMessage());
        assertTrue(e.getMessage().contains(EchoWorkflow.NAME), e.getMessage());
        assertEquals("<config>:1: orchestra.name: unknown workflow 'serch' (did you mean search?); known workflows: "
                + String.join(", ", Workflows.names()) + " (a workflow of your own is found when its jar is on DRMAS_CLASSPATH, listed "
                + "in the jar's META-INF/services/dev.drmas.workflow.Workflow)", error("orchestra: {name: serch}\n"));
        assertTrue(e.getMessage().endsWith("DRMAS_CLASSPATH, listed in the jar's META-INF/services/dev.drmas.workflow.Workflow)"),
                e.getMessage());
    }

    @Test
    void aServicesEntryWhoseClassIsMissingIsLeftOutWithAWarning() throws IOException {
        // a user's jar (here a folder) whose services file names a class it does not hold, then EchoWorkflow
        Path services = Files.createDirectories(tmp.resolve("jar/META-INF/services"));
        Files.writeString(services.resolve(Workflow.class.getName()), "org.example.pc.Missing\n" + EchoWorkflow.class.getName() + "\n");
        List<String> warnings = new java.util.ArrayList<>();
        try (var loader = new java.net.URLClassLoader(new java.net.URL[] {tmp.resolve("jar").toUri().toURL()},
                Workflow.class.getClassLoader())) {
            var found = Workflows.load(loader, warnings::add);
            assertTrue(found.keySet().containsAll(List.of("math", "search", EchoWorkflow.NAME)), found.keySet().toString());
        }
        assertEquals(1, warnings.size(), warnings.toString());
        String w = warnings.getFirst();
        assertTrue(w.startsWith("drmas: warning: a workflow could not be loaded and is left out: ") && w.contains("org.example.pc.Missing")
                && w.contains("DRMAS_CLASSPATH") && w.contains("META-INF/services/dev.drmas.workflow.Workflow"), w);
    }

    @Test
    void optionsAreTheWorkflowsOwnRecords() {
        RunConfig math = RunConfig.parse("orchestra: {name: math, options: {max_loops: 3}}\n", List.of());
        assertEquals(new MathOptions(3, MalformedVerdict.APPROVE, 0.1, false, GraderOptions.defaults()), math.orchestra().options());
        assertInstanceOf(ArithmeticData.class, math.data().synthetic());

        RunConfig search = RunConfig.parse("""
                orchestra: {name: search, options: {retriever: {top_k: 5}}}
                data: {synthetic: {people: 12}}
                """, List.of("orchestra.options.max_turns=2"));
        SearchOptions so = search.orchestra().options(SearchOptions.class);
        assertEquals(2, so.maxTurns());
        assertEquals(5, so.retriever().topK());
        assertEquals(0.01, so.invalidPenalty(), "search's own default penalty");
        assertEquals(12, search.data().synthetic(KnowledgeBaseData.class).people());
        assertEquals(List.of("verifier", "searcher", "answerer"), search.agents().stream().map(a -> a.role()).toList(),
                "a config without agents gets the workflow's roles");
        // written back in full, and read back equal
        String yaml = search.toYaml();
        assertTrue(yaml.contains("history_length: 4") && yaml.contains("countries: 8"), yaml);
        assertEquals(search, RunConfig.parse(yaml, List.of()));

        RunConfig echo = RunConfig.parse("orchestra: {name: test-echo, options: {repeats: 2}}\ndata: {source: jsonl, train_file: t.jsonl}\n"
                + "trainer: {eval_freq: 0}\n", List.of());
        assertEquals(new EchoWorkflow.EchoOptions(2, 0.1), echo.orchestra().options());
        assertNull(echo.data().synthetic(), "no generator: no data.synthetic");
        assertEquals(List.of("echo"), echo.agents().stream().map(a -> a.id()).toList());
    }

    @Test
    void badOptionsNameTheirKeyPath() {
        assertEquals("<config>:1: orchestra.options.max_loop: unknown key (did you mean orchestra.options.max_loops?)",
                error("orchestra: {options: {max_loop: 3}}\n"));
        assertEquals("<config>:3: orchestra.options.max_turns: must be > 0, got 0",
                error("orchestra:\n  name: search\n  options: {max_turns: 0}\n"));
        assertEquals("<config>:1: orchestra.options.malformed_verdict: 'ignore' is not one of approve, reject",
                error("orchestra: {options: {malformed_verdict: ignore}}\n"));
        assertEquals("override 'orchestra.options.retriever.top_kk=2': orchestra.options.retriever.top_kk: no such key in the "
                + "config schema (did you mean orchestra.options.retriever.top_k?)", error("orchestra: {name: search}\n",
                "orchestra.options.retriever.top_kk=2"));
        // math's keys under the search workflow
        assertTrue(error("orchestra: {name: search, options: {max_loops: 2}}\n").contains("orchestra.options.max_loops: unknown key"));
        assertTrue(error("orchestra: {name: search}\ndata: {synthetic: {digits: 2}}\n").contains("data.synthetic.digits: unknown key"));
        // a workflow without a generator
        assertEquals("data.source: is synthetic, but workflow 'test-echo' has no built-in task generator: set "
                + "data.source: jsonl and data.train_file", error("orchestra: {name: test-echo}\n"));
        assertTrue(error("orchestra: {name: test-echo}\ndata: {source: jsonl, train_file: t.jsonl, synthetic: {a: 1}}\n")
                .contains("data.synthetic: workflow 'test-echo' has no data.synthetic"));
    }

    @Test
    void rolesAreDeclaredOnceAndCheckedAtLoad() {
        // the bounds the config layer checks are those each workflow's team is built with
        assertEquals(List.of(new RoleSpec("solver", 1, 1), new RoleSpec("verifier", 0, 1)),
                Workflows.named("math").roles(MathOptions.defaults()));
        assertEquals(List.of(new RoleSpec("verifier", 1, 1), new RoleSpec("searcher", 1, 1), new RoleSpec("answerer", 1, 1)),
                Workflows.named("search").roles(SearchOptions.defaults()));
        assertEquals(List.of(new RoleSpec("proposer", 1, 5), new RoleSpec("aggregator", 1, 1)),
                Workflows.named("proposer-aggregator").roles(new ProposerOptions(5, 0.1, GraderOptions.defaults())));
        for (Workflow w : Workflows.all()) {
            List<RoleSpec> roles = w.roles(OrchestraConfig.of(w.name()).options());
            if (!roles.isEmpty()) assertEquals(roles.stream().map(RoleSpec::name).toList(), w.defaultRoles(), w.name());
        }
        assertEquals("<config>:2: agents[0].role: 'verifer' is not a role of the math workflow (solver, verifier)",
                error("agents:\n  - {id: v, role: verifer}\n  - {id: solver}\n"));
    }

    @Test
    void aWorkflowThatDeclaresNoRolesChecksItsAgentsWhenItOpens() {
        // a user's workflow written before roles could be declared: the config loads, the workflow's own check stands
        assertEquals(List.of(), Workflows.named(EchoWorkflow.NAME).roles(EchoWorkflow.EchoOptions.defaults()));
        RunConfig cfg = RunConfig.parse("""
                orchestra: {name: test-echo}
                data: {source: jsonl, train_file: t.jsonl}
                trainer: {eval_freq: 0}
                agents: [{id: echo}, {id: critic}]
                """, List.of());
        var e = assertThrows(IllegalArgumentException.class, () -> Workflows.open(cfg, new PrintStream(new ByteArrayOutputStream())));
        assertEquals("agents[1].role: 'critic' is not a role of the test-echo workflow (echo)", e.getMessage());
    }

    @Test
    void aClassPathWorkflowTrainsThroughTheUnchangedTrainer() throws IOException {
        Path data = tmp.resolve("tasks.jsonl");
        Files.writeString(data, "{\"question\": \"7\", \"answer\": \"7\"}\n{\"question\": \"3\", \"answer\": \"3\"}\n");
        RunConfig cfg = RunConfig.parse("""
                run: {name: echo, seed: 2, threads: 1, device: cpu}
                data: {source: jsonl}
                models:
                  policy:
                    family: qwen3
                    size: {hidden: 32, layers: 1, heads: 2, kv_heads: 1, intermediate: 64, max_positions: 256}
                orchestra: {name: test-echo, options: {repeats: 2}}
                rollout: {tasks_per_step: 2, rollouts_per_task: 2, max_new_tokens: 4, max_prompt_tokens: 64}
                trainer: {steps: 2, eval_freq: 2, eval_before_train: false, save_freq: 0}
                metrics: {progress_bar: false, tensorboard: false}
                """, List.of("run.output_dir=" + tmp, "data.train_file=" + data, "data.test_file=" + data));
        try (Trainer t = Trainer.open(cfg, new PrintStream(new ByteArrayOutputStream()))) {
            t.train();
        }
        List<String> lines = Files.readAllLines(tmp.resolve("echo").resolve("metrics.jsonl"));
        var m = new ObjectMapper();
        var step2 = m.readTree(lines.stream().filter(l -> l.contains("\"reward/mean\"")).reduce((a, b) -> b).orElseThrow());
        assertEquals(2, step2.get("step").asInt());
        assertEquals(8.0, step2.get("rows").asDouble(), "2 tasks × 2 rollouts × 2 turns of the echo agent");
        assertTrue(step2.has("echo/reply_chars") && step2.has("agent/echo/adv_std"), step2.toString());
        var eval = m.readTree(lines.getLast());
        assertTrue(eval.has("eval/echo/reply_chars") && eval.has("eval/pass@1"), eval.toString());
        String saved = Files.readString(tmp.resolve("echo").resolve("config.yaml"));
        assertTrue(saved.contains("name: test-echo") && saved.contains("repeats: 2") && saved.contains("invalid_penalty: 0.1"), saved);
    }
}
