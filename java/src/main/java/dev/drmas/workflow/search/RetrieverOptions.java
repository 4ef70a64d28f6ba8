// RetrieverOptions.java — `orchestra.options.retriever:`: where the search workflow's searcher looks things
// up: Lucene BM25 in-process (over the built-in knowledge base, a JSONL corpus, or an index built by
// `drmas index`) or a Search-R1 style HTTP retrieval server.
package dev.drmas.workflow.search;

import dev.drmas.algo.ConfigEnum;
import dev.drmas.config.Check;
import dev.drmas.config.ConfigException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Path;

/**
 * @param type            {@code bm25} (default, in-process Lucene) or {@code http}
 * @param corpus          bm25: a JSONL passage corpus (id, title, text) indexed in memory at start;
 *                        null (default) = the built-in knowledge base's passages
 * @param index           bm25: a Lucene index folder written by {@code drmas index} (used instead
 *                        of corpus, for corpora too large to index at every start); default null
 * @param url             http: the server's endpoint, e.g. {@code http://127.0.0.1:8000/retrieve}
 * @param topK            passages per search, &gt;= 1; default 3
 * @param timeoutS        http: seconds to wait for one batch before its searches count as failed,
 *                        &gt; 0; default 10
 * @param maxPassageChars a passage's text is cut to this many characters in the information block,
 *                        so that one huge passage (a 5 MB document in a corpus) cannot fill the
 *                        prompt; default 2000 (Search-R1's 100-word passages are ~600); 0 = no limit
 * @param outageS         http: how long a server that fails every search of a batch (down, hung, or
 *                        refusing every query) is retried, waiting 1 s, 2 s, ... up to 30 s between
 *                        tries, before the run stops naming its error (a run that went on would
 *                        train on "search failed" for as long as it is down: during a training step
 *                        it stops after that step and saves it, RetrieverGuard); &gt;= 0, default 600;
 *                        0 = no retry: every search of the batch shows "search failed" and the run
 *                        goes on. A single query that a working server refuses fails alone.
 * @param maxBatch        http: the most queries one request carries (a larger batch goes as several
 *                        requests, one after another, each within timeout_s), &gt;= 1; default 512
 * @param request         http: {@code batch} (default: {"queries": [...]}, Search-R1's server) or
 *                        {@code single} ({"query": q}, one query a request, as the Dr. MAS reference's
 *                        server takes; 16 requests out at a time, each wave within timeout_s)
 */
public record RetrieverOptions(Type type, Path corpus, Path index, String url, int topK, double timeoutS,
                              int maxPassageChars, double outageS, int maxBatch, Request request) {

    public enum Type implements ConfigEnum {
        BM25("bm25"), HTTP("http");

        private final String configName;

        Type(String configName) {
            this.configName = configName;
        }

        @Override
        public String configName() {
            return configName;
        }
    }

    public enum Request implements ConfigEnum {
        BATCH("batch"), SINGLE("single");

        private final String configName;

        Request(String configName) {
            this.configName = configName;
        }

        @Override
        public String configName() {
            return configName;
        }
    }

    public static final int DEFAULT_MAX_PASSAGE_CHARS = 2000;
    public static final double DEFAULT_OUTAGE_S = 600;
    public static final int DEFAULT_MAX_BATCH = 512;

    public RetrieverOptions {
        Check.given(type, "type");
        Check.that(type != Type.HTTP || url != null && !url.isBlank(), "url", "is required when retriever.type is http");
        Check.that(url == null || url.startsWith("http://") || url.startsWith("https://"), "url",
                "'" + url + "' must start with http:// or https://");
        if (url != null) checkUrl(url);
        Check.that(corpus == null || index == null, "index", "and retriever.corpus are both set; set one (index: a folder "
                + "written by drmas index; corpus: a JSONL file indexed at start)");
        Check.positive(topK, "top_k");
        Check.positive(timeoutS, "timeout_s");
        Check.nonNegative(maxPassageChars, "max_passage_chars");
        Check.that(Double.isFinite(outageS) && outageS >= 0, "outage_s", "must be >= 0 (0: no retry), got " + Check.num(outageS));
        Check.positive(maxBatch, "max_batch");
        Check.given(request, "request");
    }

    /** A URL the HTTP client can send to: it parses, names a host, and its port (if any) is a port. */
    private static void checkUrl(String url) {
        URI u;
        try {
            u = new URI(url);
        } catch (URISyntaxException e) {
            throw ConfigException.at("url", "'" + url + "' is not a valid URL: " + e.getReason()
                    + (e.getIndex() >= 0 ? " at character " + (e.getIndex() + 1) : ""));
        }
        Check.that(u.getHost() != null && !u.getHost().isEmpty(), "url", "'" + url + "' names no host (http://HOST:PORT/retrieve)");
        Check.that(u.getPort() == -1 || u.getPort() >= 1 && u.getPort() <= 65535, "url",
                "'" + url + "': port " + u.getPort() + " is outside 1..65535");
    }

    public static RetrieverOptions defaults() {
        return new RetrieverOptions(Type.BM25, null, null, null, 3, 10.0, DEFAULT_MAX_PASSAGE_CHARS, DEFAULT_OUTAGE_S, DEFAULT_MAX_BATCH, Request.BATCH);
    }
}
