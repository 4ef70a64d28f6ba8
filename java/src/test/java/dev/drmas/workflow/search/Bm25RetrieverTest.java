// Bm25RetrieverTest.java — real Lucene BM25 over the built-in knowledge base: the gold passage of a
// 1-hop question is in the top 3 for at least 95% of the questions (the rate is computed and
// printed), the second hop's entity finds its passage, an index written to disk by buildIndex reads
// back with the same results (and a failed rebuild leaves it as it was), an index laid out as
// Pyserini writes one opens and one that stores no passage is refused, scores follow BM25 with
// k1 = 0.9 and b = 0.4 (checked by hand on two passages) and a term said twice counts twice, as
// Pyserini's bag of words, closing closes what the retriever holds, and bad corpus lines name file:line.
package dev.drmas.workflow.search;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.env.TaskFileException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.StoredField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.store.ByteBuffersDirectory;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.store.FilterDirectory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class Bm25RetrieverTest {
    @TempDir
    Path tmp;

    static final KnowledgeBase KB = KnowledgeBase.generate(new KnowledgeBase.Sizes(8, 30, 40, 150), 4321);

    /** Fraction of questions whose gold passage for hop {@code hop} is among the top 3 for {@code query}. */
    static double top3Rate(Retriever r, List<KnowledgeBase.Question> qs, boolean questionAsQuery, int hop) {
        List<String> queries = qs.stream().map(q -> questionAsQuery ? q.task().question() : q.hops().get(hop)).toList();
        List<Retriever.Result> res = r.search(queries, 3);
        int found = 0;
        for (int i = 0; i < qs.size(); i++) {
            assertFalse(res.get(i).failed(), () -> "search failed: " + res.get(0).error());
            String gold = qs.get(i).goldPassageIds().get(hop);
            if (res.get(i).hits().stream().anyMatch(h -> h.passage().id().equals(gold))) found++;
        }
        return found / (double) qs.size();
    }

    @Test
    void goldPassageOfOneHopQuestionsIsInTopThree() {
        try (Bm25Retriever r = Bm25Retriever.inMemory(KB.passages())) {
            assertEquals(KB.passages().size(), r.size());
            double rate = top3Rate(r, KB.oneHopQuestions(), true, 0);
            System.out.printf("BM25 top-3 gold rate, %d synthetic 1-hop questions (question as query): %.4f%n",
                    KB.oneHopQuestions().size(), rate);
            assertTrue(rate >= 0.95, "top-3 rate " + rate + " < 0.95");
            // the second hop: the bridge entity's name finds its passage
            double second = top3Rate(r, KB.twoHopQuestions(), false, 1);
            System.out.printf("BM25 top-3 gold rate, second hop of %d 2-hop questions (bridge entity as query): %.4f%n",
                    KB.twoHopQuestions().size(), second);
            assertTrue(second >= 0.95, "second-hop rate " + second);
        }
    }

    @Test
    void hitsAreRankedAndCarryThePassage() {
        try (Bm25Retriever r = Bm25Retriever.inMemory(KB.passages())) {
            KnowledgeBase.Question q = KB.oneHopQuestions().getFirst();
            List<Passage.Hit> hits = r.search(List.of(q.task().question()), 3).getFirst().hits();
            assertEquals(3, hits.size());
            for (int i = 1; i < hits.size(); i++) assertTrue(hits.get(i - 1).score() >= hits.get(i).score(), "best first");
            Passage gold = KB.passages().stream().filter(p -> p.id().equals(q.goldPassageIds().getFirst())).findFirst().orElseThrow();
            assertEquals(gold, hits.getFirst().passage(), "stored title and text come back as indexed");
            // a query of stop words only matches nothing, and is not a failure
            Retriever.Result none = r.search(List.of("the of and"), 3).getFirst();
            assertFalse(none.failed());
            assertTrue(none.hits().isEmpty());
        }
    }

    @Test
    void indexOnDiskAnswersLikeTheInMemoryIndex() throws Exception {
        Path corpus = tmp.resolve("corpus.jsonl"), index = tmp.resolve("index");
        CorpusFile.write(corpus, KB.passages());
        assertEquals(KB.passages().size(), Bm25Retriever.buildIndex(corpus, index));
        List<String> queries = KB.twoHopQuestions().stream().limit(20).map(q -> q.task().question()).toList();
        try (Bm25Retriever disk = Bm25Retriever.open(index); Bm25Retriever mem = Bm25Retriever.inMemory(KB.passages())) {
            assertEquals(mem.search(queries, 3), disk.search(queries, 3));
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Bm25Retriever.open(tmp.resolve("nope")));
        assertTrue(e.getMessage().contains("drmas index"), e.getMessage());
        Files.createDirectories(tmp.resolve("empty"));
        e = assertThrows(IllegalArgumentException.class, () -> Bm25Retriever.open(tmp.resolve("empty")));
        assertTrue(e.getMessage().contains("not a Lucene index"), e.getMessage());
    }

    @Test
    void aFailedRebuildLeavesTheIndexAsItWas() throws Exception {
        // Lucene's IndexWriter commits on close: a corpus bad half-way used to replace the index with its first lines
        Path good = tmp.resolve("good.jsonl"), bad = tmp.resolve("bad.jsonl"), index = tmp.resolve("index");
        StringBuilder g = new StringBuilder();
        for (int i = 0; i < 100; i++) g.append("{\"id\": \"").append(i).append("\", \"title\": \"T").append(i).append("\", \"text\": \"passage ").append(i).append("\"}\n");
        Files.writeString(good, g);
        assertEquals(100, Bm25Retriever.buildIndex(good, index));
        Files.writeString(bad, "{\"id\": \"a\", \"text\": \"alpha\"}\n{\"id\": \"b\", \"text\": \"beta\"}\n{\"id\": \"c\"}\n");
        TaskFileException e = assertThrows(TaskFileException.class, () -> Bm25Retriever.buildIndex(bad, index));
        assertTrue(e.getMessage().startsWith(bad + ":3:") && e.getMessage().contains("field 'text' is missing"), e.getMessage());
        try (Bm25Retriever r = Bm25Retriever.open(index)) {
            assertEquals(100, r.size());
            assertEquals("T5", r.search(List.of("passage 5"), 1).getFirst().hits().getFirst().passage().title());
        }
    }

    /** A document as Pyserini (Anserini) indexes a JsonCollection: "id" stored, "contents" indexed, the line stored as "raw". */
    private static Document pyserini(String id, String contents, boolean raw) {
        Document doc = new Document();
        doc.add(new StringField("id", id, Field.Store.YES));
        doc.add(new TextField("contents", contents, raw ? Field.Store.NO : Field.Store.YES));
        if (raw) doc.add(new StoredField("raw", new com.fasterxml.jackson.databind.ObjectMapper().createObjectNode().put("id", id)
                .put("contents", contents).toString()));
        return doc;
    }

    @Test
    void aPyseriniIndexOpensAndOneWithoutPassagesIsRefused() throws Exception {
        for (boolean raw : new boolean[] {true, false}) {  // --storeRaw, or --storeContents only
            Path idx = tmp.resolve("pyserini-" + raw);
            try (Directory d = FSDirectory.open(idx); IndexWriter w = new IndexWriter(d, new IndexWriterConfig(new EnglishAnalyzer()))) {
                w.addDocument(pyserini("0", "\"Paris\"\nParis is the capital of France.", raw));
                w.addDocument(pyserini("1", "\"Rome\"\nRome is the capital of Italy.", raw));
            }
            try (Bm25Retriever r = Bm25Retriever.open(idx)) {
                Retriever.Result res = r.search(List.of("capital of France"), 3).getFirst();
                assertFalse(res.failed(), res.error());
                assertEquals(new Passage("0", "Paris", "Paris is the capital of France."), res.hits().getFirst().passage());
            }
        }
        // stored ids only (Pyserini without --storeRaw or --storeContents): refused when it opens, not at every search
        Path bare = tmp.resolve("bare");
        try (Directory d = FSDirectory.open(bare); IndexWriter w = new IndexWriter(d, new IndexWriterConfig(new EnglishAnalyzer()))) {
            Document doc = new Document();
            doc.add(new StringField("id", "0", Field.Store.YES));
            doc.add(new TextField("contents", "Paris is the capital of France.", Field.Store.NO));
            w.addDocument(doc);
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Bm25Retriever.open(bare));
        assertTrue(e.getMessage().contains("not a drmas index (no stored 'title'/'text' fields") && e.getMessage().contains("[id]")
                && e.getMessage().contains("drmas index CORPUS.jsonl " + bare), e.getMessage());
    }

    /** A directory that counts its closes. */
    private static final class Counted extends FilterDirectory {
        final AtomicInteger closed = new AtomicInteger();

        Counted(Directory in) {
            super(in);
        }

        @Override
        public void close() throws java.io.IOException {
            closed.incrementAndGet();
            super.close();
        }
    }

    @Test
    void whatTheRetrieverHoldsIsClosed() throws Exception {
        // a folder without an index: its directory is closed with the error
        Counted empty = new Counted(new ByteBuffersDirectory());
        assertThrows(IllegalArgumentException.class, () -> Bm25Retriever.open(empty, "empty"));
        assertEquals(1, empty.closed.get());
        // an index that is not drmas's
        Counted foreign = new Counted(new ByteBuffersDirectory());
        try (IndexWriter w = new IndexWriter(foreign, new IndexWriterConfig(new EnglishAnalyzer()))) {
            Document doc = new Document();
            doc.add(new StringField("id", "0", Field.Store.YES));
            doc.add(new TextField("contents", "x", Field.Store.NO));
            w.addDocument(doc);
        }
        assertThrows(IllegalArgumentException.class, () -> Bm25Retriever.open(foreign, "foreign"));
        assertEquals(1, foreign.closed.get());
        // a retriever closed: its directory, and its analyzer (a search then fails on the analyzer, before the reader)
        Bm25Retriever r = Bm25Retriever.inMemory(List.of(new Passage("1", "A", "alpha")));
        r.close();
        Retriever.Result after = r.search(List.of("alpha"), 1).getFirst();
        assertTrue(after.failed() && after.error().contains("Analyzer is closed"), after.error());
    }

    @Test
    void aTermSaidTwiceCountsTwice() {
        // Pyserini's BagOfWordsQueryGenerator boosts a term by its count in the query
        List<Passage> ps = List.of(new Passage("ab", "", "alpha beta gamma"), new Passage("a", "", "alpha delta"),
                new Passage("b", "", "beta epsilon zeta"));
        try (Bm25Retriever r = Bm25Retriever.inMemory(ps)) {
            List<Retriever.Result> res = r.search(List.of("alpha", "beta", "alpha alpha beta"), 3);
            double alpha = score(res.get(0), "ab"), beta = score(res.get(1), "ab");
            assertEquals(2 * alpha + beta, score(res.get(2), "ab"), 1e-5);
        }
    }

    private static double score(Retriever.Result res, String id) {
        return res.hits().stream().filter(h -> h.passage().id().equals(id)).findFirst().orElseThrow().score();
    }

    @Test
    void scoresAreBm25WithPyserinisParameters() {
        // "paris" three times in 23 terms against once in 3: with k1 = 0.9, b = 0.4 term frequency
        // outweighs length and the long passage ranks first; Lucene's defaults (1.2, 0.75) reverse it
        String filler = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango";
        List<Passage> ps = List.of(new Passage("long", "", "paris paris paris " + filler), new Passage("short", "", "paris uniform victor"));
        assertEquals(23, Bm25Retriever.terms("paris paris paris " + filler).size(), "no filler word is a stop word");
        try (Bm25Retriever r = Bm25Retriever.inMemory(ps)) {
            List<Passage.Hit> hits = r.search(List.of("paris"), 2).getFirst().hits();
            assertEquals(List.of("long", "short"), hits.stream().map(h -> h.passage().id()).toList());
            // Lucene's BM25: idf · tf / (tf + k1 · (1 − b + b · dl / avgdl)), idf = ln(1 + (N − n + 0.5) / (n + 0.5));
            // both lengths are below 24, which Lucene's length norm stores exactly
            double k1 = 0.9, b = 0.4, avgdl = (23 + 3) / 2.0, idf = Math.log(1 + (2 - 2 + 0.5) / (2 + 0.5));
            double longScore = idf * 3 / (3 + k1 * (1 - b + b * 23 / avgdl)), shortScore = idf * 1 / (1 + k1 * (1 - b + b * 3 / avgdl));
            assertEquals(longScore, hits.get(0).score(), 1e-6, "long");
            assertEquals(shortScore, hits.get(1).score(), 1e-6, "short");
        }
    }

    @Test
    void corpusLinesAreCheckedWithFileAndLine() throws Exception {
        Path f = tmp.resolve("c.jsonl");
        Files.writeString(f, "{\"id\": 1, \"title\": \"A\", \"text\": \"alpha\"}\n\n{\"id\": \"2\", \"contents\": \"\\\"Beta\\\"\\nbeta text\"}\n");
        assertEquals(List.of(new Passage("1", "A", "alpha"), new Passage("2", "Beta", "beta text")), CorpusFile.read(f),
                "Search-R1's contents: the title is the first line, quotes stripped");
        // a byte order mark, and NaN in a field not read (Python's json.dumps of a pandas gap)
        Files.writeString(f, "\uFEFF{\"id\": \"1\", \"text\": \"alpha\", \"score\": NaN}\n");
        assertEquals(List.of(new Passage("1", "", "alpha")), CorpusFile.read(f));
        for (String[] bad : new String[][] {
                {"{\"id\": NaN, \"text\": \"a\"}\n", ":1: field 'id' must be a string or an integer"},
                {"{\"id\": \"1\", \"text\": \"a\"}\n{\"id\": \"1\", \"text\": \"b\"}\n", ":2: id '1' was already used on line 1"},
                {"{\"title\": \"x\", \"text\": \"a\"}\n", ":1: field 'id' is missing"},
                {"{\"id\": \"1\", \"title\": \"x\"}\n", ":1: field 'text' is missing"},
                {"{\"id\": \"1\", \"text\": 5}\n", ":1: field 'text' must be a string"},
                {"\n{\"id\": \"1\", \"text\": \"a\"\n", ":2: not valid JSON"},
                // a key given twice, two objects on one line: errors, not the last value kept or the second object dropped
                {"{\"id\": \"1\", \"text\": \"a\", \"text\": \"b\"}\n", ":1: not valid JSON (duplicate field 'text'"},
                {"{\"id\": \"1\", \"text\": \"a\"}{\"id\": \"2\", \"text\": \"b\"}\n", ":1: not valid JSON ("},
                {"", ": no passages"}}) {
            Files.writeString(f, bad[0]);
            TaskFileException e = assertThrows(TaskFileException.class, () -> CorpusFile.read(f));
            assertTrue(e.getMessage().startsWith(f.toString()) && e.getMessage().contains(bad[1]), e.getMessage());
        }
    }
    @Test
    void idsThatShareAHashAreNotDuplicatesAndADuplicateNamesItsFirstLine() throws Exception {
        // every id with one hash: each repeated hash is settled by reading the file again
        Path f = tmp.resolve("c.jsonl");
        Files.writeString(f, "{\"id\": \"a\", \"text\": \"x\"}\n\n{\"id\": \"b\", \"text\": \"x\"}\n{\"id\": 7, \"text\": \"x\"}\n");
        List<String> ids = new ArrayList<>();
        assertEquals(3, CorpusFile.forEach(f, p -> ids.add(p.id()), new PassageIds(id -> 42)));
        assertEquals(List.of("a", "b", "7"), ids);
        Files.writeString(f, Files.readString(f) + "{\"id\": \"c\", \"text\": \"x\"}\n{\"id\": \"7\", \"text\": \"y\"}\n");
        TaskFileException e = assertThrows(TaskFileException.class, () -> CorpusFile.forEach(f, p -> { }, new PassageIds(id -> 42)));
        assertEquals(f + ":6: id '7' was already used on line 4", e.getMessage(), "an integer id and its string are one id");
        e = assertThrows(TaskFileException.class, () -> CorpusFile.forEach(f, p -> { }));
        assertEquals(f + ":6: id '7' was already used on line 4", e.getMessage(), "the same with the real hash");
    }

    @Test
    @org.junit.jupiter.api.Timeout(30)
    void aCorpusFromAPipeIsReadOnce() throws Exception {
        // drmas index <(zcat corpus.jsonl.gz) ...: a pipe cannot be read again to settle a repeated hash
        Path fifo = tmp.resolve("corpus.pipe");
        assertEquals(0, new ProcessBuilder("mkfifo", fifo.toString()).start().waitFor());
        for (String[] c : new String[][] {{"a", "b", null}, {"a", "a", ":2: id 'a' was already used on line 1"}}) {
            Thread writer = new Thread(() -> {
                try {
                    Files.writeString(fifo, "{\"id\": \"" + c[0] + "\", \"text\": \"x\"}\n{\"id\": \"" + c[1] + "\", \"text\": \"y\"}\n");
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            writer.start();
            try {
                if (c[2] == null) {
                    assertEquals(2, CorpusFile.forEach(fifo, p -> { }, new PassageIds(id -> 42)));
                } else {
                    TaskFileException e = assertThrows(TaskFileException.class, () -> CorpusFile.forEach(fifo, p -> { }, new PassageIds(id -> 42)));
                    assertEquals(fifo + c[2], e.getMessage());
                }
            } finally {
                writer.join();
            }
        }
    }

    @Test
    void theIdTableGrowsAndItsHashPartsIdsLikeACorpus() {
        // ids as corpora number them: no two of 400K share a hash (each that did would cost a read of the file)
        PassageIds ids = new PassageIds();
        for (int i = 0; i < 200_000; i++) {
            assertTrue(ids.add(Integer.toString(i)), "id " + i);
            assertTrue(ids.add(String.format("doc_%07d", i)), "doc_" + i);
        }
        for (int i = 0; i < 200_000; i += 997) assertFalse(ids.add(Integer.toString(i)), "id " + i + " again");
        assertFalse(ids.add("doc_0199999"));
    }
}
