// Bm25Retriever.java — in-process BM25 over a passage corpus with Apache Lucene: build an index on
// disk (`drmas index CORPUS.jsonl INDEX_DIR`) or in memory (the built-in knowledge base, small
// corpora), then answer batched queries. Analysis is Lucene's EnglishAnalyzer (lower case, English
// stop words, Porter stemming) and BM25 runs with k1 = 0.9, b = 0.4, the settings of Pyserini's
// BM25 that Search-R1's BM25 baseline uses. Title and text are indexed as one field, as Pyserini's
// "contents".
package dev.drmas.workflow.search;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.StoredField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexNotFoundException;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.StoredFields;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.ByteBuffersDirectory;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.FSDirectory;

public final class Bm25Retriever implements Retriever {
    static final String ID = "id", TITLE = "title", TEXT = "text", CONTENTS = "contents";
    /** Pyserini's BM25 defaults. */
    static final float K1 = 0.9f, B = 0.4f;
    // a query is a bag of terms; a model rambling into its query must not hit BooleanQuery's limit
    static final int MAX_QUERY_TERMS = 256;

    // Lucene warns on every start that the Vector API incubator module is not enabled; BM25 over
    // postings does not use it, so the warning is noise on every drmas command. Held in a field:
    // java.util.logging keeps loggers weakly, and a collected logger forgets its level.
    private static final java.util.logging.Logger VECTOR_LOG = quiet("org.apache.lucene.internal.vectorization");

    private static java.util.logging.Logger quiet(String name) {
        java.util.logging.Logger l = java.util.logging.Logger.getLogger(name);
        l.setLevel(java.util.logging.Level.SEVERE);
        return l;
    }

    private final Directory dir;
    private final DirectoryReader reader;
    private final IndexSearcher searcher;
    private final Analyzer analyzer = analyzer();

    private Bm25Retriever(Directory dir) throws IOException {
        this.dir = dir;
        this.reader = DirectoryReader.open(dir);
        this.searcher = new IndexSearcher(reader);
        searcher.setSimilarity(new BM25Similarity(K1, B));
    }

    /** The analyzer of index and queries. */
    static Analyzer analyzer() {
        return new EnglishAnalyzer();
    }

    /** The terms a text is indexed and searched as (lower-cased, stemmed, without stop words). */
    public static List<String> terms(String text) {
        try (Analyzer a = analyzer()) {
            return terms(a, text);
        }
    }

    private static List<String> terms(Analyzer a, String text) {
        List<String> out = new ArrayList<>();
        try (TokenStream ts = a.tokenStream(CONTENTS, text)) {
            CharTermAttribute term = ts.addAttribute(CharTermAttribute.class);
            ts.reset();
            while (ts.incrementToken()) out.add(term.toString());
            ts.end();
        } catch (IOException e) {
            throw new UncheckedIOException(e);  // reading a String does not fail
        }
        return out;
    }

    /** An in-memory index of {@code passages}: for the built-in knowledge base and small corpora. */
    public static Bm25Retriever inMemory(List<Passage> passages) {
        try {
            Directory d = new ByteBuffersDirectory();
            write(d, passages::forEach);
            return new Bm25Retriever(d);
        } catch (IOException e) {
            throw new UncheckedIOException("building the in-memory BM25 index", e);
        }
    }

    /**
     * Indexes the JSONL corpus {@code corpus} into {@code indexDir} (created; an existing index
     * there is replaced). Returns the number of passages.
     */
    public static long buildIndex(Path corpus, Path indexDir) {
        long[] n = new long[1];
        try {
            Files.createDirectories(indexDir);
            try (Directory d = FSDirectory.open(indexDir)) {
                write(d, sink -> n[0] = CorpusFile.forEach(corpus, sink));
            }
        } catch (IOException e) {
            throw new UncheckedIOException("writing the BM25 index " + indexDir + ": " + e.getMessage(), e);
        }
        return n[0];
    }

    /** Opens an index written by {@link #buildIndex}. */
    public static Bm25Retriever open(Path indexDir) {
        if (!Files.isDirectory(indexDir)) {
            throw new IllegalArgumentException(indexDir + ": no such index folder (build one with: drmas index CORPUS.jsonl " + indexDir + ")");
        }
        try {
            return new Bm25Retriever(FSDirectory.open(indexDir));
        } catch (IndexNotFoundException e) {
            throw new IllegalArgumentException(indexDir + ": not a Lucene index (build one with: drmas index CORPUS.jsonl " + indexDir + ")");
        } catch (IOException e) {
            throw new UncheckedIOException("opening the BM25 index " + indexDir + ": " + e.getMessage(), e);
        }
    }

    private interface Source {
        void forEach(java.util.function.Consumer<Passage> sink);
    }

    private static void write(Directory d, Source passages) throws IOException {
        IndexWriterConfig iwc = new IndexWriterConfig(analyzer());
        iwc.setSimilarity(new BM25Similarity(K1, B));  // norms are encoded the same for any BM25; set for clarity
        iwc.setOpenMode(IndexWriterConfig.OpenMode.CREATE);
        // committed only when every passage is in: a corpus that fails half-way must leave the index
        // there as it was (CREATE replaces it only at the commit), where closing with Lucene's default
        // commit-on-close would replace it with the passages read so far
        iwc.setCommitOnClose(false);
        try (IndexWriter w = new IndexWriter(d, iwc)) {
            IOException[] failed = new IOException[1];
            passages.forEach(p -> {
                if (failed[0] != null) return;
                Document doc = new Document();
                doc.add(new StringField(ID, p.id(), Field.Store.YES));
                doc.add(new StoredField(TITLE, p.title()));
                doc.add(new StoredField(TEXT, p.text()));
                doc.add(new TextField(CONTENTS, p.title() + "\n" + p.text(), Field.Store.NO));
                try {
                    w.addDocument(doc);
                } catch (IOException e) {
                    failed[0] = e;
                }
            });
            if (failed[0] != null) throw failed[0];
            w.forceMerge(1);  // one segment: the index is written once and read many times
            w.commit();
        }  // without the commit (an exception above), close() rolls the writer back
    }

    /** Passages in the index. */
    public int size() {
        return reader.numDocs();
    }

    @Override
    public List<Result> search(List<String> queries, int k) {
        if (k < 1) throw new IllegalArgumentException("top_k must be >= 1, got " + k);
        List<Result> out = new ArrayList<>(queries.size());
        for (String q : queries) {
            try {
                out.add(Result.ok(searchOne(q, k)));
            } catch (IOException | RuntimeException e) {
                out.add(Result.failed("BM25 search failed: " + e));
            }
        }
        return out;
    }

    private List<Passage.Hit> searchOne(String query, int k) throws IOException {
        Set<String> terms = new LinkedHashSet<>(terms(analyzer, query));
        if (terms.isEmpty()) return List.of();  // only stop words or punctuation: nothing to match
        BooleanQuery.Builder b = new BooleanQuery.Builder();
        int n = 0;
        for (String t : terms) {
            if (n++ == MAX_QUERY_TERMS) break;
            b.add(new TermQuery(new Term(CONTENTS, t)), BooleanClause.Occur.SHOULD);
        }
        TopDocs top = searcher.search(b.build(), k);
        StoredFields stored = searcher.storedFields();
        List<Passage.Hit> hits = new ArrayList<>(top.scoreDocs.length);
        for (ScoreDoc sd : top.scoreDocs) {
            Document d = stored.document(sd.doc);
            hits.add(new Passage.Hit(new Passage(d.get(ID), d.get(TITLE), d.get(TEXT)), sd.score));
        }
        return hits;
    }

    @Override
    public void close() {
        try {
            reader.close();
            dir.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
