// Bm25Retriever.java — in-process BM25 over a passage corpus with Apache Lucene: build an index on
// disk (`drmas index CORPUS.jsonl INDEX_DIR`) or in memory (the built-in knowledge base, small
// corpora), then answer batched queries. Analysis is Lucene's EnglishAnalyzer (lower case, English
// stop words, Porter stemming) and BM25 runs with k1 = 0.9, b = 0.4, the settings of Pyserini's
// BM25 that Search-R1's BM25 baseline uses. Title and text are indexed as one field, as Pyserini's
// "contents". An index that Pyserini (Anserini) wrote opens too: its "contents" is searched the same
// way and each hit's passage read from its stored "raw" JSON (or stored "contents"); an index that
// stores none of these is refused when it opens, not at every search.
package dev.drmas.workflow.search;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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
import org.apache.lucene.index.FieldInfo;
import org.apache.lucene.index.FieldInfos;
import org.apache.lucene.index.IndexOptions;
import org.apache.lucene.index.IndexReader;
import org.apache.lucene.index.IndexNotFoundException;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.MultiBits;
import org.apache.lucene.index.StoredFields;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.BoostQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.ByteBuffersDirectory;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.util.Bits;

public final class Bm25Retriever implements Retriever {
    static final String ID = "id", TITLE = "title", TEXT = "text", CONTENTS = "contents";
    /** Pyserini's stored copy of the corpus line (JSON: id, contents). */
    static final String RAW = "raw";
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

    /** Where a hit's passage is stored: drmas's id, title, text; Pyserini's raw JSON; or its stored contents. */
    enum Layout {
        DRMAS, PYSERINI_RAW, PYSERINI_CONTENTS
    }

    private final Directory dir;
    private final DirectoryReader reader;
    private final IndexSearcher searcher;
    private final Layout layout;
    private final Analyzer analyzer = analyzer();

    /** Reads the index in {@code dir} (named {@code where} in errors); closes nothing it was given when it fails. */
    private Bm25Retriever(Directory dir, String where) throws IOException {
        this.dir = dir;
        try {
            this.reader = DirectoryReader.open(dir);
        } catch (IOException | RuntimeException | Error e) {
            analyzer.close();
            throw e;
        }
        try {
            this.layout = layout(reader, where);
        } catch (RuntimeException | Error e) {
            try {
                reader.close();
            } catch (IOException s) {
                e.addSuppressed(s);
            }
            analyzer.close();
            throw e;
        }
        this.searcher = new IndexSearcher(reader);
        searcher.setSimilarity(new BM25Similarity(K1, B));
    }

    /** How the index stores its passages, read from its first document; refused when drmas cannot read it. */
    static Layout layout(IndexReader r, String where) throws IOException {
        String rebuild = ": build one with: drmas index CORPUS.jsonl " + where;
        FieldInfo searched = FieldInfos.getMergedFieldInfos(r).fieldInfo(CONTENTS);
        if (r.numDocs() > 0 && (searched == null || searched.getIndexOptions() == IndexOptions.NONE)) {
            throw new IllegalArgumentException(where + ": not a drmas index (no indexed '" + CONTENTS + "' field to search)" + rebuild);
        }
        if (r.numDocs() == 0) return Layout.DRMAS;  // nothing to read, nothing found
        Bits live = MultiBits.getLiveDocs(r);
        int first = 0;
        while (live != null && !live.get(first)) first++;
        Document d = r.storedFields().document(first);
        if (d.get(TEXT) != null) return Layout.DRMAS;
        if (d.get(RAW) != null) return Layout.PYSERINI_RAW;
        if (d.get(CONTENTS) != null) return Layout.PYSERINI_CONTENTS;
        Set<String> stored = new java.util.TreeSet<>();
        for (var f : d.getFields()) stored.add(f.name());
        throw new IllegalArgumentException(where + ": not a drmas index (no stored '" + TITLE + "'/'" + TEXT + "' fields, nor Pyserini's"
                + " stored '" + RAW + "' or '" + CONTENTS + "'; its documents store " + (stored.isEmpty() ? "nothing" : stored) + ")" + rebuild);
    }

    /** The passage of a stored document, as the index's layout keeps it. */
    private Passage passage(Document d, int doc) {
        if (layout == Layout.DRMAS) {
            String id = d.get(ID), title = d.get(TITLE);
            return new Passage(id == null ? Integer.toString(doc) : id, title == null ? "" : title, java.util.Objects.requireNonNullElse(d.get(TEXT), ""));
        }
        String stored = layout == Layout.PYSERINI_RAW ? d.get(RAW) : d.get(CONTENTS);
        if (stored == null) throw new IllegalStateException("document " + doc + " of the index stores no '" + (layout == Layout.PYSERINI_RAW ? RAW : CONTENTS) + "'");
        com.fasterxml.jackson.databind.JsonNode node = null;
        if (layout == Layout.PYSERINI_RAW) {
            try {
                node = JSON.readTree(stored);
            } catch (IOException e) {
                node = null;  // raw text (a TREC collection's document): read as contents
            }
        }
        if (node == null || !node.isObject()) node = JSON.createObjectNode().put(CONTENTS, stored);
        return CorpusFile.document(node, d.get(ID), "document " + doc + " of the index");
    }

    private static final com.fasterxml.jackson.databind.ObjectMapper JSON = new com.fasterxml.jackson.databind.ObjectMapper();

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
            return new Bm25Retriever(d, "the in-memory index");
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

    /**
     * Opens an index written by {@link #buildIndex}, or by Pyserini (searched field "contents", the
     * passage in stored "raw" JSON or stored "contents").
     *
     * @throws IllegalArgumentException for a folder that holds no index, or one that stores no passage drmas can read
     */
    public static Bm25Retriever open(Path indexDir) {
        if (!Files.isDirectory(indexDir)) {
            throw new IllegalArgumentException(indexDir + ": no such index folder (build one with: drmas index CORPUS.jsonl " + indexDir + ")");
        }
        Directory d;
        try {
            d = FSDirectory.open(indexDir);
        } catch (IOException e) {
            throw new UncheckedIOException("opening the BM25 index " + indexDir + ": " + e.getMessage(), e);
        }
        return open(d, indexDir.toString());
    }

    /** The index in {@code d} ({@code where} in errors), which the retriever closes; closed here when it cannot open. */
    static Bm25Retriever open(Directory d, String where) {
        try {
            return new Bm25Retriever(d, where);
        } catch (IndexNotFoundException e) {
            closeAfter(d, e);
            throw new IllegalArgumentException(where + ": not a Lucene index (build one with: drmas index CORPUS.jsonl " + where + ")");
        } catch (IOException e) {
            closeAfter(d, e);
            throw new UncheckedIOException("opening the BM25 index " + where + ": " + e.getMessage(), e);
        } catch (RuntimeException | Error e) {
            closeAfter(d, e);
            throw e;
        }
    }

    // the directory of an index that failed to open: closed, a failure to close kept with the first
    private static void closeAfter(Directory d, Throwable first) {
        try {
            d.close();
        } catch (IOException | RuntimeException e) {
            first.addSuppressed(e);
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
        // a bag of words: each term once, weighted by how often the query says it, as Pyserini's
        // BagOfWordsQueryGenerator (a BoostQuery of the count)
        Map<String, Integer> terms = new LinkedHashMap<>();
        for (String t : terms(analyzer, query)) terms.merge(t, 1, Integer::sum);
        if (terms.isEmpty()) return List.of();  // only stop words or punctuation: nothing to match
        BooleanQuery.Builder b = new BooleanQuery.Builder();
        int n = 0;
        for (Map.Entry<String, Integer> t : terms.entrySet()) {
            if (n++ == MAX_QUERY_TERMS) break;
            Query q = new TermQuery(new Term(CONTENTS, t.getKey()));
            b.add(t.getValue() == 1 ? q : new BoostQuery(q, t.getValue()), BooleanClause.Occur.SHOULD);
        }
        TopDocs top = searcher.search(b.build(), k);
        StoredFields stored = searcher.storedFields();
        List<Passage.Hit> hits = new ArrayList<>(top.scoreDocs.length);
        for (ScoreDoc sd : top.scoreDocs) hits.add(new Passage.Hit(passage(stored.document(sd.doc), sd.doc), sd.score));
        return hits;
    }

    /** Closes the reader, the directory and the analyzer, each even when an earlier one fails to close. */
    @Override
    public void close() {
        try (dir; analyzer) {
            reader.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
