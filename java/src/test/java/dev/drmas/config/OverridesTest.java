// OverridesTest.java — Hydra-style overrides: set (nested keys, list values, list entries by
// index or id, whole sections), add with +, set-or-add with ++, delete with ~, applied in order
// over the file and checked against the schema.
package dev.drmas.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.drmas.algo.NormMode;
import dev.drmas.model.Family;
import dev.drmas.workflow.math.ArithmeticData;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class OverridesTest {
    @TempDir
    Path dir;

    static final String FILE = """
            ppo:
              clip_low: 0.1
              epochs: 2
            agents:
              - {id: solver, model: policy}
              - {id: verifier, model: policy}
            """;

    RunConfig load(String... overrides) throws IOException {
        Path p = dir.resolve("run.yaml");
        Files.writeString(p, FILE);
        return RunConfig.load(p, List.of(overrides));
    }

    String fails(String... overrides) {
        return assertThrows(ConfigException.class, () -> load(overrides)).getMessage();
    }

    @Test
    void nestedKeys() throws IOException {
        RunConfig c = load("ppo.clip_high=0.28", "algorithm.mode=grpo", "rollout.top_p=0.9", "run.seed=42");
        assertEquals(0.28, c.ppo().clipHigh());
        assertEquals(0.1, c.ppo().clipLow(), "keys the overrides do not touch keep the file's value");
        assertEquals(NormMode.GRPO, c.algorithm().mode());
        assertEquals(0.9, c.rollout().topP());
        assertEquals(42, c.run().seed());
    }

    @Test
    void insideTheDefaultModelsOfAFileThatListsNone() throws IOException {
        RunConfig c = load("models.policy.optim.lr=1e-5", "models.policy.family=llama");
        assertEquals(1e-5, c.optimFor("policy").lr());
        assertEquals(Family.LLAMA, c.models().get("policy").family());
        assertEquals(ModelSpec.defaults().size(), c.models().get("policy").size());
    }

    @Test
    void valuesAreYaml() throws IOException {
        RunConfig c = load("models.policy.optim.betas=[0.9, 0.95]", "data.synthetic.operators=[-,+]",
                "ppo.dual_clip=null", "run.name=2024", "ppo.shuffle=false", "trainer.steps=1000");
        assertEquals(List.of(0.9, 0.95), c.optimFor("policy").betas());
        assertEquals(List.of("-", "+"), c.data().synthetic(ArithmeticData.class).operators());
        assertNull(c.ppo().dualClip());
        assertEquals("2024", c.run().name(), "a number given for a string is its text");
        assertEquals(false, c.ppo().shuffle());
        assertEquals(1000, c.trainer().steps());
    }

    @Test
    void aWholeSectionAsAFlowMapping() throws IOException {
        RunConfig c = load("ppo={epochs: 3}");
        assertEquals(3, c.ppo().epochs());
        assertEquals(0.2, c.ppo().clipLow(), "the section is replaced: the file's clip_low is gone, the default is back");
    }

    @Test
    void listEntriesByIndexOrById() throws IOException {
        RunConfig c = load("+models.verifier_model.size.layers=4", "agents[1].model=verifier_model",
                "agents.0.role=verifier", "agents.1.role=solver", "agents.verifier.optim.lr=2e-6");
        assertEquals(List.of("policy", "verifier_model"), List.copyOf(c.models().keySet()),
                "adding a model keeps the default one");
        assertEquals(4, c.models().get("verifier_model").size().layers());
        assertEquals("verifier_model", c.agent("verifier").model());
        assertEquals("verifier", c.agent("solver").role());
        assertEquals(2e-6, c.optimFor("verifier_model").lr());
        assertEquals(1e-6, c.optimFor("policy").lr());
    }

    @Test
    void addWithPlus() throws IOException {
        // math has at most one verifier: the file's goes, and one is appended in its place
        RunConfig c = load("+run.name=exp", "~agents[1]", "+agents[1]={id: verifier}", "+ppo.kl_coef=0.01", "+ppo.reference_model=true");
        assertEquals("exp", c.run().name());
        assertEquals(new AgentSpec("verifier", "verifier", "policy"), c.agents().get(1), "role defaults to the id");
        assertEquals(0.01, c.ppo().klCoef());
        assertEquals(new AgentSpec("critic", "verifier", "policy"), load("~agents[1]", "+agents[1].id=critic", "agents[1].role=verifier")
                .agents().get(1), "an entry appended key by key");

        assertEquals("override '+ppo.epochs=3': ppo.epochs: is already set in the config; override it with ppo.epochs=3"
                + " (or ++ppo.epochs=3)", fails("+ppo.epochs=3"));
        assertEquals(3, load("++ppo.epochs=3", "++ppo.clip_high=0.3").ppo().epochs(), "++ sets or adds");
        assertEquals(0.3, load("++ppo.clip_high=0.3").ppo().clipHigh());
    }

    @Test
    void deleteWithTilde() throws IOException {
        RunConfig c = load("~ppo.clip_low", "~agents[1]");
        assertEquals(0.2, c.ppo().clipLow(), "a deleted key is back to its default");
        assertEquals(2, c.ppo().epochs());
        assertEquals(List.of("solver"), c.agents().stream().map(AgentSpec::id).toList());
        assertEquals(PpoConfig.defaults(), load("~ppo").ppo());
        assertEquals(RunConfig.defaults().agents(), load("~agents").agents());

        assertEquals("override '~ppo.clip_high': ppo.clip_high: is not set in the config, nothing to delete",
                fails("~ppo.clip_high"));
        assertEquals("override '~ppo.epochs=2': a delete takes no value: write ~ppo.epochs", fails("~ppo.epochs=2"));
    }

    @Test
    void laterOverridesWin() throws IOException {
        assertEquals(5, load("ppo.epochs=4", "ppo.epochs=5").ppo().epochs());
        assertEquals(4, load("ppo={epochs: 3}", "ppo.epochs=4").ppo().epochs());
    }

    @Test
    void onAConfigInCode() {
        RunConfig c = RunConfig.defaults().withOverrides(List.of("trainer.steps=3", "rollout.tasks_per_step=2"));
        assertEquals(3, c.trainer().steps());
        assertEquals(2, c.rollout().tasksPerStep());
        assertEquals(RunConfig.defaults().ppo(), c.ppo());
    }

    @Test
    void badOverrides() {
        assertEquals("override 'ppo.clip_hgh=0.3': ppo.clip_hgh: no such key in the config schema"
                + " (did you mean ppo.clip_high?)", fails("ppo.clip_hgh=0.3"));
        assertEquals("override 'models.policy.optim.lrr=1': models.policy.optim.lrr: no such key in the config schema"
                + " (did you mean models.policy.optim.lr?)", fails("models.policy.optim.lrr=1"));
        assertEquals("override 'rollouts.top_p=1': rollouts: no such key in the config schema (did you mean rollout?)",
                fails("rollouts.top_p=1"));
        assertEquals("override 'zzz=1': zzz: no such key in the config schema", fails("zzz=1"));
        assertEquals("override 'models.polcy.optim.lr=1': models.polcy: no such entry (did you mean policy?);"
                + " entries: policy; add one with +models.polcy.optim.lr=...", fails("models.polcy.optim.lr=1"));
        assertEquals("override 'agents[2].model=x': agents[2]: no such entry: agents has 2 entries (ids solver, verifier);"
                + " append one with +agents[2].model=...", fails("agents[2].model=x"));
        assertEquals("override 'agents.critic.model=x': agents[critic]: no such entry: agents has 2 entries"
                + " (ids solver, verifier)", fails("agents.critic.model=x"));
        assertEquals("override 'ppo.epochs': expected key.path=value", fails("ppo.epochs"));
        assertEquals("override '=3': the key is empty", fails("=3"));
        assertEquals("override 'ppo.epochs.x=1': ppo.epochs: is 2 (a number) in the config, not a section;"
                + " cannot set a key under it", fails("ppo.epochs.x=1"));
        assertEquals("override 'ppo.clip_high.x=1': ppo.clip_high: is a single value; it has no key x",
                fails("ppo.clip_high.x=1"));
        assertEquals("override 'ppo..epochs=1': bad key path 'ppo..epochs' has an empty key", fails("ppo..epochs=1"));
        assertEquals("override 'ppo.epochs=[1': the value is not valid YAML (while parsing a flow sequence);"
                + " quote it if it is a string", fails("ppo.epochs=[1"));
        // the value is checked when binding, and the error names the override
        assertEquals("override 'ppo.epochs=two': ppo.epochs: expected an integer, got 'two' (a string)",
                fails("ppo.epochs=two"));
        assertEquals("override 'run.resume=': run.resume: must not be empty", fails("run.resume="));
    }
}
