// HttpRetriever.java — a client of a Search-R1 style retrieval server, so that users can plug in
// an existing (e.g. dense, e5 + FAISS) retriever: POST {url} with
// {"queries": [...], "topk": k, "return_scores": true} (Search-R1's server; request: single sends
// {"query": q, ...} one query a request, as the Dr. MAS reference's server takes), answered by
// {"result": [[{"document": {...}, "score"}, ...], ...]}, one list per query; a document is read
// leniently (CorpusFile.document: Search-R1's {"id", "contents"} or its BM25 server's
// {"title", "text", "contents"} without an id). Uses the JDK's HttpClient. Every wait is bounded by
// the timeout; a timeout, a refused connection, a non-200 status or a malformed body fails that
// request's queries (logged and counted by the caller; the last two as refused, the server having
// answered, except a proxy's 502/503/504; as is a response too large to be one, read no further
// than a bound), never with an exception. The search workload's
// RetrieverGuard decides what an outage of the server does to a run.
package dev.drmas.workflow.search;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

public final class HttpRetriever implements Retriever {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final URI url;
    private final Duration timeout;
    private final HttpClient client;
    private final int maxBatch;
    private final RetrieverOptions.Request mode;
    /** request: single: how many one-query requests are out at once (a wave, answered within the timeout). */
    static final int SINGLE_IN_FLIGHT = 16;
    /**
     * A response is read up to max(MIN_BODY_BYTES, queries × top_k × BODY_BYTES_PER_PASSAGE) bytes: a
     * server that ignores topk (or sends whole books) must not fill the trainer's heap. Generous:
     * Search-R1's wiki passages are ~600 characters, and a long passage is cut for the prompt anyway.
     */
    static final long MIN_BODY_BYTES = 16L << 20, BODY_BYTES_PER_PASSAGE = 64L << 10;
    private final long minBodyBytes;

    /** As below, with requests of at most {@link RetrieverOptions#DEFAULT_MAX_BATCH} queries. */
    public HttpRetriever(URI url, Duration timeout) {
        this(url, timeout, RetrieverOptions.DEFAULT_MAX_BATCH);
    }

    /** As below, batched. */
    public HttpRetriever(URI url, Duration timeout, int maxBatch) {
        this(url, timeout, maxBatch, RetrieverOptions.Request.BATCH);
    }

    /**
     * @param url      the endpoint, e.g. {@code http://127.0.0.1:8000/retrieve}
     * @param timeout  bound on connecting and on the whole exchange of one request
     * @param maxBatch the most queries one request carries, &gt;= 1 (batch)
     * @param mode     BATCH: {"queries": [...]} requests of at most maxBatch queries, one after another;
     *                 SINGLE: {"query": q} requests, {@link #SINGLE_IN_FLIGHT} at a time
     */
    public HttpRetriever(URI url, Duration timeout, int maxBatch, RetrieverOptions.Request mode) {
        this(url, timeout, maxBatch, mode, MIN_BODY_BYTES);
    }

    /** As above, reading a response up to max(minBodyBytes, queries × k × BODY_BYTES_PER_PASSAGE) bytes (tests pass a small one). */
    HttpRetriever(URI url, Duration timeout, int maxBatch, RetrieverOptions.Request mode, long minBodyBytes) {
        this.minBodyBytes = minBodyBytes;
        if (maxBatch < 1) throw new IllegalArgumentException("retriever max_batch must be >= 1, got " + maxBatch);
        this.maxBatch = maxBatch;
        this.mode = java.util.Objects.requireNonNull(mode, "request");
        if (url == null || url.getScheme() == null || !(url.getScheme().equals("http") || url.getScheme().equals("https"))) {
            throw new IllegalArgumentException("retriever url '" + url + "' must be an http:// or https:// URL");
        }
        if (timeout == null || timeout.isNegative() || timeout.isZero()) throw new IllegalArgumentException("retriever timeout must be > 0");
        this.url = url;
        this.timeout = timeout;
        this.client = HttpClient.newBuilder().connectTimeout(timeout).version(HttpClient.Version.HTTP_1_1).build();
    }

    /**
     * The results of {@code queries}, asked in requests of at most maxBatch queries each, one after
     * another (a rank's whole evaluation share in one request would have to be answered within the
     * timeout), or with request: single one query a request, in waves of {@link #SINGLE_IN_FLIGHT}
     * each answered within the timeout; a request's failure fails its own queries only.
     */
    @Override
    public List<Result> search(List<String> queries, int k) {
        if (k < 1) throw new IllegalArgumentException("top_k must be >= 1, got " + k);
        List<Result> out = new ArrayList<>(queries.size());
        if (mode == RetrieverOptions.Request.SINGLE) {
            for (int i = 0; i < queries.size(); i += SINGLE_IN_FLIGHT) {
                List<String> wave = queries.subList(i, Math.min(queries.size(), i + SINGLE_IN_FLIGHT));
                long deadline = System.nanoTime() + timeout.toNanos();
                List<CompletableFuture<HttpResponse<String>>> pending = new ArrayList<>(wave.size());
                for (String q : wave) {
                    ObjectNode body = JSON.createObjectNode();
                    body.put("query", q);
                    pending.add(send(body, 1, k));
                }
                for (var p : pending) out.addAll(answer(p, 1, k, deadline));
            }
            return out;
        }
        for (int i = 0; i < queries.size(); i += maxBatch) {
            List<String> part = queries.subList(i, Math.min(queries.size(), i + maxBatch));
            ObjectNode body = JSON.createObjectNode();
            var qs = body.putArray("queries");
            part.forEach(qs::add);
            out.addAll(answer(send(body, part.size(), k), part.size(), k, System.nanoTime() + timeout.toNanos()));
        }
        return out;
    }

    private CompletableFuture<HttpResponse<String>> send(ObjectNode body, int queries, int k) {
        body.put("topk", k);
        body.put("return_scores", true);
        HttpRequest req = HttpRequest.newBuilder(url).timeout(timeout)
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body.toString(), StandardCharsets.UTF_8)).build();
        long limit = Math.max(minBodyBytes, (long) queries * k * BODY_BYTES_PER_PASSAGE);
        return client.sendAsync(req, info -> new Limited(limit));
    }

    /** A body longer than its limit. */
    private static final class TooLarge extends IOException {
        final long limit;

        TooLarge(long limit) {
            super("response over " + limit + " bytes");
            this.limit = limit;
        }
    }

    /** The body as UTF-8 text, or TooLarge as soon as it passes {@code limit} bytes (the rest is not read). */
    private static final class Limited implements HttpResponse.BodySubscriber<String> {
        private final long limit;
        private final CompletableFuture<String> body = new CompletableFuture<>();
        private final java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream();
        private java.util.concurrent.Flow.Subscription subscription;

        Limited(long limit) {
            this.limit = limit;
        }

        @Override
        public void onSubscribe(java.util.concurrent.Flow.Subscription s) {
            subscription = s;
            s.request(Long.MAX_VALUE);
        }

        @Override
        public void onNext(List<java.nio.ByteBuffer> items) {
            if (body.isDone()) return;
            for (java.nio.ByteBuffer b : items) {
                if (buf.size() + (long) b.remaining() > limit) {
                    subscription.cancel();
                    body.completeExceptionally(new TooLarge(limit));
                    return;
                }
                byte[] a = new byte[b.remaining()];
                b.get(a);
                buf.write(a, 0, a.length);
            }
        }

        @Override
        public void onError(Throwable t) {
            body.completeExceptionally(t);
        }

        @Override
        public void onComplete() {
            body.complete(buf.toString(StandardCharsets.UTF_8));
        }

        @Override
        public java.util.concurrent.CompletionStage<String> getBody() {
            return body;
        }
    }

    /** The results of one request's {@code queries} queries, waited for until {@code deadline} (System.nanoTime). */
    private List<Result> answer(CompletableFuture<HttpResponse<String>> pending, int queries, int k, long deadline) {
        String error;
        boolean refused = false;  // the server answered, with an error
        // the request timeout bounds the wait for the response headers; the outer get() also bounds
        // a server that sends headers and then stalls the body
        try {
            HttpResponse<String> resp = pending.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            if (resp.statusCode() != 200) {
                error = "HTTP " + resp.statusCode() + " from " + url + ": " + abbreviate(resp.body());
                // a proxy's 502/503/504 speaks for a server it cannot reach: as good as no answer
                int st = resp.statusCode();
                refused = st != 502 && st != 503 && st != 504;
            } else {
                return parse(resp.body(), queries, k);
            }
        } catch (TimeoutException e) {
            pending.cancel(true);
            error = "no answer from " + url + " within " + timeout.toMillis() + " ms";
        } catch (ExecutionException e) {
            TooLarge big = null;
            for (Throwable c = e.getCause(); c != null && big == null; c = c.getCause()) if (c instanceof TooLarge t) big = t;
            if (big != null) {
                // it answered, too much: as a server's error (asked one query at a time, RetrieverGuard)
                error = "refused: response from " + url + " over " + big.limit + " bytes (does the server honour \"topk\"?)";
                refused = true;
            } else {
                error = e.getCause() instanceof HttpTimeoutException
                        ? "no answer from " + url + " within " + timeout.toMillis() + " ms"
                        : "cannot reach " + url + ": " + e.getCause();
            }
        } catch (MalformedResponse e) {
            error = "bad response from " + url + ": " + e.getMessage();
            refused = true;
        } catch (InterruptedException e) {
            pending.cancel(true);
            Thread.currentThread().interrupt();
            error = "interrupted while waiting for " + url;
        }
        return Collections.nCopies(queries, refused ? Result.refused(error) : Result.failed(error));
    }

    private static final class MalformedResponse extends Exception {
        MalformedResponse(String message) {
            super(message);
        }
    }

    private static List<Result> parse(String body, int queries, int k) throws MalformedResponse {
        JsonNode root;
        try {
            root = JSON.readTree(body);
        } catch (IOException e) {
            throw new MalformedResponse("not JSON: " + abbreviate(body));
        }
        JsonNode result = root == null ? null : root.get("result");
        if (result == null || !result.isArray()) throw new MalformedResponse("no \"result\" list");
        if (result.size() != queries) {
            throw new MalformedResponse("\"result\" has " + result.size() + " lists for " + queries + " queries");
        }
        List<Result> out = new ArrayList<>(queries);
        for (int q = 0; q < queries; q++) {
            JsonNode list = result.get(q);
            if (!list.isArray()) throw new MalformedResponse("result[" + q + "] is not a list");
            List<Passage.Hit> hits = new ArrayList<>();
            for (int i = 0; i < list.size() && hits.size() < k; i++) {
                JsonNode item = list.get(i);
                // with return_scores the server wraps each document; without, it sends documents bare
                JsonNode doc = item.has("document") ? item.get("document") : item;
                double score = item.path("score").asDouble(Double.NaN);
                String at = "result[" + q + "][" + i + "]";
                try {
                    hits.add(new Passage.Hit(CorpusFile.document(doc, null, at), score));
                } catch (IllegalArgumentException e) {
                    throw new MalformedResponse(e.getMessage());
                }
            }
            out.add(Result.ok(hits));
        }
        return out;
    }

    private static String abbreviate(String s) {
        String one = s == null ? "" : s.replaceAll("\\s+", " ").strip();
        return one.length() <= 200 ? one : one.substring(0, 200) + "...";
    }

    @Override
    public void close() {
        client.close();
    }
}
