// MathWorkflow.java — the registry's entry for the math solver–verifier workflow ("math").
package dev.drmas.workflow.math;

import dev.drmas.config.RoleSpec;
import dev.drmas.config.RunConfig;
import dev.drmas.workflow.Workflow;
import dev.drmas.workflow.Workload;
import java.io.PrintStream;
import java.util.List;
import java.util.Map;

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
    public Map<String, String> idleRoles(Record options) {
        int loops = ((MathOptions) options).maxLoops();
        if (loops >= 2) return Map.of();
        // MathOrchestra skips the verifier in the last round: with one round there is no other
        return Map.of(MathAgents.VERIFIER, "the math workflow calls the verifier only after a solver turn before the last "
                + "round, which needs orchestra.options.max_loops >= 2 (it is " + loops + ")");
    }

    @Override
    public Workload open(RunConfig cfg, PrintStream log) {
        return new MathWorkload(cfg);
    }
}
