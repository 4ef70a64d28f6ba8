// Passage.java — one retrievable document of a search corpus: a stable id, a title and the text.
// What the BM25 index stores and what a retriever hands back, with its score for the query.
package dev.drmas.workflow.search;

import java.util.Objects;

public record Passage(String id, String title, String text) {
    public Passage {
        Objects.requireNonNull(id, "passage id");
        Objects.requireNonNull(title, "passage title");
        Objects.requireNonNull(text, "passage text");
    }

    /** A passage returned for a query, with the retriever's score (higher is better). */
    public record Hit(Passage passage, double score) {}
}
