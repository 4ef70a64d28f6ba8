// HttpRetrieverTest.java — the Search-R1 style client against a real HTTP server on 127.0.0.1
// (the JDK's com.sun.net.httpserver), started by the test: the request body it sends, a successful
// answer, documents without an id or text (Search-R1's BM25 server, a title-only page), the Dr. MAS
// reference's one-query server (request: single), a server slower than the timeout (before or after
// its headers), an HTTP 500, a malformed body and a closed port. Every wait is bounded by the
// client's timeout; failures come back as failed results, never as exceptions.
package dev.drmas.workflow.search;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(30)
class HttpRetrieverTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private HttpServer server;
    private final AtomicReference<JsonNode> lastRequest = new AtomicReference<>();
    private final java.util.Queue<JsonNode> singles = new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final CountDownLatch release = new CountDownLatch(1);  // holds the slow handler until the test ends

    @BeforeEach
    void start() throws IOException {
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.setExecutor(Executors.newFixedThreadPool(4));
        server.createContext("/retrieve", ex -> {
            JsonNode req = JSON.readTree(ex.getRequestBody());
            lastRequest.set(req);
            // answers like Search-R1's retrieval_server with return_scores: one list per query
            var root = JSON.createObjectNode();
            var result = root.putArray("result");
            int q = 0;
            for (JsonNode query : req.get("queries")) {
                var list = result.addArray();
                for (int i = 0; i < req.get("topk").asInt(); i++) {
                    var item = list.addObject();
                    item.putObject("document").put("id", q + "-" + i).put("contents", "\"Title " + i + "\"\n" + query.asText() + " text " + i);
                    item.put("score", 10.0 - i);
                }
                q++;
            }
            reply(ex, 200, root.toString());
        });
        server.createContext("/slow", ex -> {
            try {
                release.await(20, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            reply(ex, 200, "{\"result\": []}");
        });
        server.createContext("/stall", ex -> {  // headers at once, then a body that never completes
            ex.sendResponseHeaders(200, 1000);
            ex.getResponseBody().write("{\"result\": [".getBytes(StandardCharsets.UTF_8));
            ex.getResponseBody().flush();
            try {
                release.await(20, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            ex.close();
        });
        // Search-R1's (and the Dr. MAS reference's) retrieval_server.py, BM25 branch: {"title", "text", "contents"}, no id
        server.createContext("/bm25", ex -> {
            ex.getRequestBody().readAllBytes();
            reply(ex, 200, "{\"result\": [[{\"document\": {\"title\": \"Paris\", \"text\": \"Paris is the capital of France.\", "
                    + "\"contents\": \"\\\"Paris\\\"\\nParis is the capital of France.\"}, \"score\": 12.5}]]}");
        });
        // a dense server's corpus rows, one of them a title-only page (nothing after the title line)
        server.createContext("/titleonly", ex -> {
            ex.getRequestBody().readAllBytes();
            reply(ex, 200, "{\"result\": [[{\"document\": {\"id\": 7, \"contents\": \"\\\"Stub\\\"\\n\"}, \"score\": 1.0}]]}");
        });
        // the Dr. MAS reference's retrieval_server.py: {"query": str} (FastAPI answers 422 without it), one list back
        server.createContext("/single", ex -> {
            JsonNode req = JSON.readTree(ex.getRequestBody());
            singles.add(req);
            if (!req.has("query")) {
                reply(ex, 422, "{\"detail\": [{\"loc\": [\"body\", \"query\"], \"msg\": \"field required\"}]}");
                return;
            }
            var root = JSON.createObjectNode();
            var list = root.putArray("result").addArray();
            var item = list.addObject();
            item.putObject("document").put("id", "d").put("contents", "\"T\"\n" + req.get("query").asText());
            item.put("score", 1.0);
            reply(ex, 200, root.toString());
        });
        // a server that ignores topk: 100 documents of 2000 characters for one query (~200 kB)
        server.createContext("/big", ex -> {
            ex.getRequestBody().readAllBytes();
            StringBuilder b = new StringBuilder("{\"result\": [[");
            for (int i = 0; i < 100; i++) {
                b.append(i == 0 ? "" : ",").append("{\"document\": {\"id\": \"").append(i).append("\", \"contents\": \"\\\"T\\\"\\n")
                        .append("y".repeat(2000)).append("\"}, \"score\": 1.0}");
            }
            reply(ex, 200, b.append("]]}").toString());
        });
        server.createContext("/error", ex -> reply(ex, 500, "Internal Server Error: index not loaded"));
        server.createContext("/garbage", ex -> reply(ex, 200, "{\"result\": [[{\"document\": {\"id\": \"x\"}}]]}"));
        server.start();
    }

    @AfterEach
    void stop() {
        release.countDown();
        server.stop(0);
        ((java.util.concurrent.ExecutorService) server.getExecutor()).shutdownNow();
    }

    private static void reply(HttpExchange ex, int status, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.sendResponseHeaders(status, b.length);
        ex.getResponseBody().write(b);
        ex.close();
    }

    private URI url(String path) {
        return URI.create("http://127.0.0.1:" + server.getAddress().getPort() + path);
    }

    @Test
    void sendsSearchR1RequestAndReadsScoredDocuments() {
        try (HttpRetriever r = new HttpRetriever(url("/retrieve"), Duration.ofSeconds(10))) {
            List<Retriever.Result> res = r.search(List.of("who is alpha", "beta"), 2);
            JsonNode req = lastRequest.get();
            assertEquals(List.of("who is alpha", "beta"), List.of(req.get("queries").get(0).asText(), req.get("queries").get(1).asText()));
            assertEquals(2, req.get("topk").asInt());
            assertTrue(req.get("return_scores").asBoolean());
            assertEquals(2, res.size());
            assertFalse(res.get(1).failed());
            assertEquals(List.of(new Passage.Hit(new Passage("1-0", "Title 0", "beta text 0"), 10.0),
                    new Passage.Hit(new Passage("1-1", "Title 1", "beta text 1"), 9.0)), res.get(1).hits());
        }
    }

    @Test
    void documentsWithoutAnIdOrWithoutTextAreRead() {
        try (HttpRetriever r = new HttpRetriever(url("/bm25"), Duration.ofSeconds(10))) {
            Retriever.Result res = r.search(List.of("capital of france"), 3).getFirst();
            assertFalse(res.failed(), res.error());
            Passage p = res.hits().getFirst().passage();
            assertEquals(List.of("Paris", "Paris is the capital of France."), List.of(p.title(), p.text()));
            assertTrue(p.id().startsWith("sha256:"), "an id from the document, the same in every answer: " + p.id());
            assertEquals(p.id(), r.search(List.of("paris"), 3).getFirst().hits().getFirst().passage().id());
            assertEquals(12.5, res.hits().getFirst().score());
        }
        try (HttpRetriever r = new HttpRetriever(url("/titleonly"), Duration.ofSeconds(10))) {
            Retriever.Result res = r.search(List.of("stub"), 3).getFirst();
            assertFalse(res.failed(), res.error());
            assertEquals(new Passage("7", "Stub", ""), res.hits().getFirst().passage());
        }
    }

    @Test
    void requestSingleSendsOneQueryARequest() {
        try (HttpRetriever r = new HttpRetriever(url("/single"), Duration.ofSeconds(10), 512, RetrieverOptions.Request.SINGLE)) {
            List<String> qs = new java.util.ArrayList<>();
            for (int i = 0; i < HttpRetriever.SINGLE_IN_FLIGHT + 3; i++) qs.add("q" + i);  // two waves
            List<Retriever.Result> res = r.search(qs, 2);
            assertEquals(qs.size(), res.size());
            for (int i = 0; i < qs.size(); i++) {
                assertFalse(res.get(i).failed(), res.get(i).error());
                assertEquals("q" + i, res.get(i).hits().getFirst().passage().text(), "answers in query order");
            }
            assertEquals(qs.size(), singles.size());
            JsonNode one = singles.peek();
            assertEquals(2, one.get("topk").asInt());
            assertTrue(one.get("return_scores").asBoolean() && !one.has("queries"), one.toString());
        }
        // batched (the default), the same server refuses the request
        try (HttpRetriever r = new HttpRetriever(url("/single"), Duration.ofSeconds(10))) {
            Retriever.Result res = r.search(List.of("a"), 2).getFirst();
            assertTrue(res.refused() && res.error().contains("HTTP 422"), res.error());
        }
    }

    @Test
    void aResponseOverItsBoundIsRefused() {
        // one query, top 1: read up to max(1000, 1 x 1 x 64 KiB) bytes
        try (HttpRetriever r = new HttpRetriever(url("/big"), Duration.ofSeconds(10), 512, RetrieverOptions.Request.BATCH, 1000)) {
            Retriever.Result res = r.search(List.of("q"), 1).getFirst();
            assertTrue(res.failed() && res.refused(), String.valueOf(res.error()));
            assertTrue(res.error().contains("refused: response from") && res.error().contains("over 65536 bytes"), res.error());
            // top 5 allows 320 KiB: the same answer is read (and cut to the top 5)
            Retriever.Result five = r.search(List.of("q"), 5).getFirst();
            assertFalse(five.failed(), five.error());
            assertEquals(5, five.hits().size());
        }
        try (HttpRetriever r = new HttpRetriever(url("/retrieve"), Duration.ofSeconds(10), 512, RetrieverOptions.Request.BATCH, 1000)) {
            assertFalse(r.search(List.of("a"), 1).getFirst().failed(), "an ordinary answer is well within the bound");
        }
    }

    @Test
    void aSlowServerIsAFailedSearchAfterTheTimeout() {
        try (HttpRetriever r = new HttpRetriever(url("/slow"), Duration.ofMillis(300))) {
            long t0 = System.nanoTime();
            List<Retriever.Result> res = r.search(List.of("a", "b"), 3);
            double waited = (System.nanoTime() - t0) / 1e9;
            assertEquals(2, res.size());
            assertTrue(res.get(0).failed() && res.get(1).failed());
            assertTrue(res.get(0).error().contains("within 300 ms"), res.get(0).error());
            assertTrue(waited < 15, "the wait is bounded by the timeout, not by the server (" + waited + " s)");
        }
        try (HttpRetriever r = new HttpRetriever(url("/stall"), Duration.ofMillis(300))) {
            Retriever.Result res = r.search(List.of("a"), 3).getFirst();
            assertTrue(res.failed());
            assertTrue(res.error().contains("within 300 ms"), "a stalled body is bounded too: " + res.error());
        }
    }

    @Test
    void serverErrorsAndBadBodiesAreFailedSearches() {
        try (HttpRetriever r = new HttpRetriever(url("/error"), Duration.ofSeconds(5))) {
            Retriever.Result res = r.search(List.of("a"), 3).getFirst();
            assertTrue(res.failed());
            assertTrue(res.error().contains("HTTP 500") && res.error().contains("index not loaded"), res.error());
        }
        try (HttpRetriever r = new HttpRetriever(url("/garbage"), Duration.ofSeconds(5))) {
            Retriever.Result res = r.search(List.of("a"), 3).getFirst();
            assertTrue(res.failed());
            assertTrue(res.error().contains("bad response") && res.error().contains("result[0][0]: a document needs a string \"contents\" or \"text\""),
                    res.error());
        }
    }

    @Test
    void aClosedPortIsAFailedSearch() throws IOException {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();  // free once closed: nothing listens there
        }
        try (HttpRetriever r = new HttpRetriever(URI.create("http://127.0.0.1:" + port + "/retrieve"), Duration.ofSeconds(5))) {
            Retriever.Result res = r.search(List.of("a"), 3).getFirst();
            assertTrue(res.failed());
            assertTrue(res.error().contains("cannot reach"), res.error());
        }
    }
}
