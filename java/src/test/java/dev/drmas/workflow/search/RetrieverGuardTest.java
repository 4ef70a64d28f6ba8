// RetrieverGuardTest.java — a retrieval server's outage during a run: against a real HTTP server on
// 127.0.0.1 (the JDK's com.sun.net.httpserver) that starts late, one that refuses one query of a
// batch, and one that is never there (the run stops naming it); the guard's waits and its deadline
// on a scripted retriever with a clock of the test's own (the retry schedule as a state machine).
package dev.drmas.workflow.search;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class RetrieverGuardTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A Search-R1 style server on {@code port} (0: any) that answers 500 for a batch holding a query with "poison". */
    private static HttpServer server(int port, AtomicInteger requests) throws IOException {
        return server(port, requests, new java.util.concurrent.CopyOnWriteArrayList<>());
    }

    /** As above, noting each request's number of queries in {@code sizes}; /unavailable answers 503 as a proxy without its backend. */
    private static HttpServer server(int port, AtomicInteger requests, List<Integer> sizes) throws IOException {
        HttpServer s = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 0);
        s.setExecutor(Executors.newFixedThreadPool(2));
        s.createContext("/unavailable", ex -> reply(ex, 503, "no healthy upstream"));
        s.createContext("/retrieve", ex -> {
            requests.incrementAndGet();
            JsonNode req = JSON.readTree(ex.getRequestBody());
            sizes.add(req.get("queries").size());
            var root = JSON.createObjectNode();
            var result = root.putArray("result");
            for (JsonNode q : req.get("queries")) {
                if (q.asText().contains("poison")) {
                    reply(ex, 500, "query too long for the encoder");
                    return;
                }
                result.addArray().addObject().putObject("document").put("id", q.asText()).put("contents", "\"T\"\nabout " + q.asText());
            }
            reply(ex, 200, root.toString());
        });
        s.start();
        return s;
    }

    private static void reply(HttpExchange ex, int status, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.sendResponseHeaders(status, b.length);
        ex.getResponseBody().write(b);
        ex.close();
    }

    private static void stop(HttpServer s) {
        s.stop(0);
        ((java.util.concurrent.ExecutorService) s.getExecutor()).shutdownNow();
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();  // free once closed
        }
    }

    @Test
    void aServerThatComesBackLateIsWaitedFor() throws Exception {
        int port = freePort();
        URI url = URI.create("http://127.0.0.1:" + port + "/retrieve");
        AtomicInteger requests = new AtomicInteger();
        List<HttpServer> started = new ArrayList<>();
        // nothing listens for ~1.5 s (connections refused), then the server is up: the guard's waits of 1 s and 2 s
        Thread late = new Thread(() -> {
            try {
                Thread.sleep(1500);
                started.add(server(port, requests));
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        try (HttpRetriever r = new HttpRetriever(url, Duration.ofSeconds(5))) {
            late.start();
            List<Retriever.Result> res = new RetrieverGuard(r, 3, 20, url.toString(), new PrintStream(log, true, StandardCharsets.UTF_8))
                    .search(List.of("alpha", "beta"));
            late.join();
            assertEquals(List.of(false, false), res.stream().map(Retriever.Result::failed).toList(), res.toString());
            assertEquals("about beta", res.get(1).hits().getFirst().passage().text());
            String said = log.toString(StandardCharsets.UTF_8);
            assertTrue(said.contains("drmas: search failed: cannot reach " + url) && said.contains("trying again in 1 s"), said);
        } finally {
            started.forEach(RetrieverGuardTest::stop);
        }
        // and without the guard's retries (outage_s 0) the same refused connection is a failed search at once
        try (HttpRetriever r = new HttpRetriever(URI.create("http://127.0.0.1:" + freePort() + "/retrieve"), Duration.ofSeconds(5))) {
            assertTrue(new RetrieverGuard(r, 3, 0, "x", new PrintStream(new ByteArrayOutputStream())).search(List.of("a")).getFirst().failed());
        }
    }

    @Test
    void aQueryTheServerRefusesFailsAloneAndTheRestAreAnswered() throws Exception {
        AtomicInteger requests = new AtomicInteger();
        HttpServer s = server(0, requests);
        URI url = URI.create("http://127.0.0.1:" + s.getAddress().getPort() + "/retrieve");
        try (HttpRetriever r = new HttpRetriever(url, Duration.ofSeconds(5))) {
            RetrieverGuard g = new RetrieverGuard(r, 3, 600, url.toString(), new PrintStream(new ByteArrayOutputStream()));
            long t0 = System.nanoTime();
            List<Retriever.Result> res = g.search(List.of("alpha", "poison pill", "gamma"));
            assertEquals(List.of(false, true, false), res.stream().map(Retriever.Result::failed).toList(), res.toString());
            assertTrue(res.get(1).refused() && res.get(1).error().contains("HTTP 500"), res.get(1).error());
            assertEquals(4, requests.get(), "the batch, then each query alone");
            assertTrue((System.nanoTime() - t0) / 1e9 < 5, "no outage waits for a refused query");
            // a batch of the refused query alone fails at once too
            assertTrue(g.search(List.of("poison")).getFirst().failed());
        } finally {
            stop(s);
        }
    }

    @Test
    void aLargeBatchGoesAsSeveralRequestsAndAProxysUnavailableIsNoAnswer() throws IOException {
        AtomicInteger requests = new AtomicInteger();
        List<Integer> sizes = new java.util.concurrent.CopyOnWriteArrayList<>();
        HttpServer s = server(0, requests, sizes);
        String base = "http://127.0.0.1:" + s.getAddress().getPort();
        try (HttpRetriever r = new HttpRetriever(URI.create(base + "/retrieve"), Duration.ofSeconds(5), 2)) {
            List<Retriever.Result> res = r.search(List.of("a", "b", "c", "d", "e"), 3);
            assertEquals(List.of(2, 2, 1), sizes);
            assertEquals(List.of("about a", "about b", "about c", "about d", "about e"),
                    res.stream().map(x -> x.hits().getFirst().passage().text()).toList());
        }
        try (HttpRetriever r = new HttpRetriever(URI.create(base + "/unavailable"), Duration.ofSeconds(5))) {
            Retriever.Result res = r.search(List.of("a"), 3).getFirst();
            assertTrue(res.failed() && !res.refused() && res.error().contains("HTTP 503"), res.toString());
        } finally {
            stop(s);
        }
    }

    @Test
    void aServerThatNeverAnswersStopsTheRunNamingIt() throws IOException {
        URI url = URI.create("http://127.0.0.1:" + freePort() + "/retrieve");
        try (HttpRetriever r = new HttpRetriever(url, Duration.ofSeconds(2))) {
            // the real connection's errors on a clock of the test's: the waited time printed is exactly the
            // deadline (on the wall clock, a slow host's scheduling or a cold HttpClient could print 2.6 s)
            long[] now = {0};
            RetrieverGuard g = new RetrieverGuard(r, 3, 2.5, url.toString(), new PrintStream(new ByteArrayOutputStream()), () -> now[0],
                    ms -> now[0] += ms);
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> g.search(List.of("a", "b")));
            assertTrue(e.getMessage().startsWith("the retriever at " + url + " failed every search of a batch of 2 queries for "), e.getMessage());
            assertTrue(e.getMessage().contains("outage_s: 2.5 s); its last error: cannot reach " + url), e.getMessage());
            assertTrue(e.getMessage().contains("for 2.5 s (orchestra.options.retriever.outage_s: 2.5 s)"), "the last try at the deadline: " + e.getMessage());
            assertTrue(e.getMessage().endsWith("The run stops here: start the server and run the same command again"), e.getMessage());
        }
    }

    /** A retriever that answers each call with the next scripted outcome for every query: "ok", "down" or "refuse". */
    private static final class Scripted implements Retriever {
        final Deque<String> script;
        final List<Integer> batchSizes = new ArrayList<>();
        final List<Long> calledAt = new ArrayList<>();  // the test clock's ms at each call
        long[] clock = {0};

        Scripted(String... outcomes) {
            script = new ArrayDeque<>(List.of(outcomes));
        }

        @Override
        public List<Result> search(List<String> queries, int k) {
            batchSizes.add(queries.size());
            calledAt.add(clock[0]);
            String o = script.isEmpty() ? "down" : script.poll();
            List<Result> out = new ArrayList<>();
            for (String q : queries) {
                out.add(switch (o) {
                    case "ok" -> Result.ok(List.of(new Passage.Hit(new Passage(q, "", "about " + q), 1.0)));
                    case "refuse" -> Result.refused("HTTP 503: index loading");
                    default -> Result.failed("cannot reach it");
                });
            }
            return out;
        }
    }

    @Test
    void theWaitsDoubleToThirtySecondsAndEndAtTheDeadline() {
        long[] now = {0};
        RetrieverGuard.Sleeper sleeper = ms -> now[0] += ms;
        PrintStream quiet = new PrintStream(new ByteArrayOutputStream());
        // down for five tries, then up: tried at 0, 1, 3, 7, 15 and 31 s
        Scripted back = new Scripted("down", "down", "down", "down", "down", "ok");
        back.clock = now;
        List<Retriever.Result> res = new RetrieverGuard(back, 3, 600, "S", quiet, () -> now[0], sleeper).search(List.of("q"));
        assertFalse(res.getFirst().failed());
        assertEquals(List.of(0L, 1000L, 3000L, 7000L, 15000L, 31000L), back.calledAt);

        // never up, 120 s allowed: waits of 1, 2, 4, 8, 16, 30, 30 s, then the last try at the deadline, then the stop
        now[0] = 0;
        Scripted never = new Scripted();
        never.clock = now;
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> new RetrieverGuard(never, 3, 120, "S", quiet, () -> now[0], sleeper).search(List.of("q", "r")));
        assertEquals(List.of(0L, 1000L, 3000L, 7000L, 15000L, 31000L, 61000L, 91000L, 120000L), never.calledAt);
        assertTrue(e.getMessage().contains("for 120 s (orchestra.options.retriever.outage_s: 120 s); its last error: cannot reach it"),
                e.getMessage());

        // a server that refuses every query alike (an index still loading) is as good as down: each round asks the batch,
        // then each query alone, then waits; it answers again after two rounds
        now[0] = 0;
        Scripted loading = new Scripted("refuse", "refuse", "refuse", "refuse", "refuse", "refuse", "ok");
        res = new RetrieverGuard(loading, 3, 600, "S", quiet, () -> now[0], sleeper).search(List.of("q", "r"));
        assertEquals(List.of(false, false), res.stream().map(Retriever.Result::failed).toList());
        assertEquals(List.of(2, 1, 1, 2, 1, 1, 2), loading.batchSizes);
        assertEquals(3000, now[0]);

        // outage_s 0: no retry
        Scripted once = new Scripted("down", "ok");
        assertTrue(new RetrieverGuard(once, 3, 0, "S", quiet, () -> now[0], sleeper).search(List.of("q")).getFirst().failed());
        assertEquals(List.of(1), once.batchSizes);
    }

    /** A training loop's side of RunStop, for the guard: a stop flag and the tool's requests. */
    private static final class Loop implements dev.drmas.workflow.RunStop.Control {
        volatile boolean stop;
        final List<String> requests = new ArrayList<>();

        @Override
        public boolean stopRequested() {
            return stop;
        }

        @Override
        public void requestStop(String why) {
            requests.add(why);
            stop = true;
        }
    }

    @Test
    void duringATrainingStepAnOutageStopsTheRunAfterTheStepAndASignalEndsTheWait() {
        long[] now = {0};
        RetrieverGuard.Sleeper sleeper = ms -> now[0] += ms;
        PrintStream quiet = new PrintStream(new ByteArrayOutputStream());
        Loop loop = new Loop();
        dev.drmas.workflow.RunStop.open(loop);
        try {
            dev.drmas.workflow.RunStop.inStep(true);
            // the deadline passes: no exception, the batch's searches fail, the run is asked to stop after the step
            Scripted never = new Scripted();
            never.clock = now;
            RetrieverGuard g = new RetrieverGuard(never, 3, 10, "http://h/retrieve", quiet, () -> now[0], sleeper);
            List<Retriever.Result> res = g.search(List.of("q", "r"));
            assertEquals(List.of(true, true), res.stream().map(Retriever.Result::failed).toList());
            assertEquals(1, loop.requests.size());
            assertTrue(loop.requests.getFirst().startsWith("the retriever at http://h/retrieve failed every search of a batch of 2 queries"
                    + " for 10 s") && loop.requests.getFirst().contains("resumes from the checkpoint of this step"), loop.requests.getFirst());
            // the step's later batches fail at once: one try each, no wait
            int calls = never.batchSizes.size();
            long t = now[0];
            assertTrue(g.search(List.of("s")).getFirst().failed());
            assertEquals(List.of(calls + 1, t), List.of(never.batchSizes.size(), now[0]));

            // a signal while the guard waits: the wait ends within its slice, the batch fails, no request of its own
            Loop signalled = new Loop();
            dev.drmas.workflow.RunStop.open(signalled);
            dev.drmas.workflow.RunStop.inStep(true);
            now[0] = 0;
            RetrieverGuard.Sleeper signalOnSecondSlice = ms -> {
                now[0] += ms;
                if (now[0] >= 2000) signalled.stop = true;
            };
            Scripted down = new Scripted();
            down.clock = now;
            res = new RetrieverGuard(down, 3, 600, "S", quiet, () -> now[0], signalOnSecondSlice).search(List.of("q"));
            assertTrue(res.getFirst().failed());
            assertEquals(List.of(), signalled.requests);
            assertTrue(now[0] <= 4000, "the wait ended at the signal: " + now[0]);

            // outside a step (an evaluation) the same signal ends the wait with an exception
            dev.drmas.workflow.RunStop.inStep(false);
            signalled.stop = false;
            now[0] = 0;
            Scripted down2 = new Scripted();
            down2.clock = now;
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> new RetrieverGuard(down2, 3, 600, "S", quiet, () -> now[0], signalOnSecondSlice).search(List.of("q")));
            assertTrue(e.getMessage().contains("(the run was asked to stop meanwhile)"), e.getMessage());
        } finally {
            dev.drmas.workflow.RunStop.close();
        }
    }
}
