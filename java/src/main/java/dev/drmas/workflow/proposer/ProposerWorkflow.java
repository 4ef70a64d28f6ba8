// ProposerWorkflow.java — the registry's entry for the proposer-aggregator workflow: P proposals,
// then one aggregated answer, on math tasks (math's generator and answer check).
package dev.drmas.workflow.proposer;

import dev.drmas.config.RoleSpec;
import dev.drmas.config.RunConfig;
import dev.drmas.workflow.Workflow;
import dev.drmas.workflow.Workload;
import dev.drmas.workflow.math.ArithmeticData;
import java.io.PrintStream;
import java.util.List;

public final class ProposerWorkflow implements Workflow {
    public static final String NAME = "proposer-aggregator";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Class<ProposerOptions> optionsType() {
        return ProposerOptions.class;
    }

    @Override
    public Class<ArithmeticData> syntheticDataType() {
        return ArithmeticData.class;
    }

    @Override
    public List<String> defaultRoles() {
        return ProposerWorkload.roles(ProposerOptions.defaults()).names();
    }

    @Override
    public List<RoleSpec> roles(Record options) {
        return ProposerWorkload.roles((ProposerOptions) options).specs();
    }

    @Override
    public Workload open(RunConfig cfg, PrintStream log) {
        return new ProposerWorkload(cfg);
    }
}
