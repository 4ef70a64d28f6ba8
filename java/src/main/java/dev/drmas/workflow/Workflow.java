// Workflow.java — one task family as the registry knows it: its name, the record types of its
// config sections (orchestra.options, data.synthetic) and how to open its Workload for a run.
// Built-in workflows and a user's own are found the same way, through java.util.ServiceLoader:
// list the implementing class in META-INF/services/dev.drmas.workflow.Workflow of your jar and put
// the jar on drmas's class path; no file of drmas changes.
package dev.drmas.workflow;

import dev.drmas.config.RunConfig;
import dev.drmas.config.WorkflowSchema;
import java.io.PrintStream;
import java.util.List;

public interface Workflow extends WorkflowSchema {
    /**
     * The workload of a run whose orchestra.name is {@link #name()}: {@code cfg.orchestra().options()}
     * and {@code cfg.data().synthetic()} are of this workflow's types. Errors in the agents or the
     * options are IllegalArgumentExceptions that name the key path.
     */
    Workload open(RunConfig cfg, PrintStream log);

    /** Extra `drmas` subcommands the workflow brings (picocli command objects), e.g. search's `index`. */
    default List<Object> commands() {
        return List.of();
    }
}
