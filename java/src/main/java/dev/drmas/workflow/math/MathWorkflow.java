// MathWorkflow.java — the registry's entry for the math solver–verifier workflow ("math").
package dev.drmas.workflow.math;

import dev.drmas.config.RoleSpec;
import dev.drmas.config.RunConfig;
import dev.drmas.workflow.Workflow;
import dev.drmas.workflow.Workload;
import java.io.PrintStream;
import java.util.List;

public final class MathWorkflow implements Workflow {
    public static final String NAME = "math";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Class<MathOptions> optionsType() {
        return MathOptions.class;
    }

    @Override
    public Class<ArithmeticData> syntheticDataType() {
        return ArithmeticData.class;
    }

    @Override
    public List<String> defaultRoles() {
        return MathWorkload.ROLES.names();
    }

    @Override
    public List<RoleSpec> roles(Record options) {
        return MathWorkload.ROLES.specs();
    }

    @Override
    public Workload open(RunConfig cfg, PrintStream log) {
        return new MathWorkload(cfg);
    }
}
