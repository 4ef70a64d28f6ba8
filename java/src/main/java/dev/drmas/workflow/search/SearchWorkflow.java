// SearchWorkflow.java — the registry's entry for the search workflow ("search"), with the `drmas
// index` command that builds a BM25 index for its retriever.
package dev.drmas.workflow.search;

import dev.drmas.config.RoleSpec;
import dev.drmas.config.RunConfig;
import dev.drmas.workflow.Workflow;
import dev.drmas.workflow.Workload;
import java.io.PrintStream;
import java.util.List;
import java.util.Map;

public final class SearchWorkflow implements Workflow {
    public static final String NAME = "search";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Class<SearchOptions> optionsType() {
        return SearchOptions.class;
    }

    @Override
    public Class<KnowledgeBaseData> syntheticDataType() {
        return KnowledgeBaseData.class;
    }

    @Override
    public List<String> defaultRoles() {
        return SearchWorkload.ROLES.names();
    }

    @Override
    public List<RoleSpec> roles(Record options) {
        return SearchWorkload.ROLES.specs();
    }

    @Override
    public Map<String, String> idleRoles(Record options) {
        int turns = ((SearchOptions) options).maxTurns();
        if (turns >= 2) return Map.of();
        // SearchOrchestra does not ask the searcher in the last turn, whose results no turn would read
        return Map.of(SearchOrchestra.SEARCHER, "the search workflow calls the searcher only after a verifier's no in a turn "
                + "before the last, which needs orchestra.options.max_turns >= 2 (it is " + turns + ")");
    }

    @Override
    public Workload open(RunConfig cfg, PrintStream log) {
        return new SearchWorkload(cfg, log);
    }

    @Override
    public List<Object> commands() {
        return List.of(new IndexCommand());
    }
}
