// IndexCommand.java — `drmas index CORPUS.jsonl INDEX_DIR`: builds the Lucene BM25 index of a
// passage corpus (JSONL: id, title, text; or Search-R1's id, contents) once, so that search runs
// open it (orchestra.options.retriever.index) instead of indexing the corpus at every start.
package dev.drmas.workflow.search;

import dev.drmas.env.TaskFileException;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

@Command(name = "index", mixinStandardHelpOptions = true,
        description = {"Build the BM25 (Lucene) index of a JSONL passage corpus for the search workload;",
                "use it with orchestra.options.retriever.index=INDEX_DIR. An index already in INDEX_DIR is replaced."})
public final class IndexCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "CORPUS.jsonl", description = "one passage per line: {\"id\", \"title\", \"text\"}")
    Path corpus;

    @Parameters(index = "1", paramLabel = "INDEX_DIR", description = "the index folder (created)")
    Path index;

    @Override
    public Integer call() {
        long t0 = System.nanoTime();
        long n;
        n = Bm25Retriever.buildIndex(corpus, index);  // a bad corpus: a TaskFileException, which the CLI reports
        System.out.printf("drmas: indexed %d passages of %s into %s (%.1f s)%n", n, corpus, index, (System.nanoTime() - t0) / 1e9);
        return 0;
    }
}
