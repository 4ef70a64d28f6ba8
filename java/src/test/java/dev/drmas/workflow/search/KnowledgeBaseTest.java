// KnowledgeBaseTest.java — the built-in world is deterministic in its seed, every answer is
// stated in the passage its question's last hop names, names are distinct terms, and the split
// holds out disjoint questions.
package dev.drmas.workflow.search;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.env.Task;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class KnowledgeBaseTest {
    static final KnowledgeBase.Sizes SIZES = new KnowledgeBase.Sizes(4, 10, 12, 40);

    @Test
    void sameSeedSameWorldOtherSeedOtherWorld() {
        KnowledgeBase a = KnowledgeBase.generate(SIZES, 7), b = KnowledgeBase.generate(SIZES, 7), c = KnowledgeBase.generate(SIZES, 8);
        assertEquals(a.passages(), b.passages());
        assertEquals(a.twoHopQuestions(), b.twoHopQuestions());
        assertNotEquals(a.passages(), c.passages());
        assertEquals(10 + 12 + 40, a.passages().size());
        assertEquals(10 + 12 + 2 * 40, a.oneHopQuestions().size());
        assertEquals(2 * 40, a.twoHopQuestions().size());
    }

    @Test
    void eachHopsPassageNamesTheNextHopOrTheAnswer() {
        KnowledgeBase kb = KnowledgeBase.generate(SIZES, 7);
        Map<String, Passage> byId = new HashMap<>();
        for (Passage p : kb.passages()) byId.put(p.id(), p);
        for (List<KnowledgeBase.Question> qs : List.of(kb.oneHopQuestions(), kb.twoHopQuestions())) {
            for (KnowledgeBase.Question q : qs) {
                Task t = q.task();
                assertTrue(t.question().contains(q.hops().getFirst()), t.question());
                assertTrue(!t.question().contains(t.answer()), "the question does not give its answer away: " + t);
                for (int h = 0; h < q.hopCount(); h++) {
                    Passage p = byId.get(q.goldPassageIds().get(h));
                    assertEquals(q.hops().get(h), p.title());
                    String next = h + 1 < q.hopCount() ? q.hops().get(h + 1) : t.answer();
                    assertTrue(p.text().contains(next), p + " should name " + next);
                }
            }
        }
    }

    @Test
    void namesAreDistinctTermsAndTheSplitIsDisjoint() {
        KnowledgeBase kb = KnowledgeBase.generate(SIZES, 7);
        Set<String> terms = new HashSet<>();
        for (Passage p : kb.passages()) {
            for (String word : p.title().split(" ")) assertTrue(terms.add(Bm25Retriever.terms(word).getFirst()), "two names share the term of " + word);
        }
        KnowledgeBase.Split s = kb.split(true, 30, 1);
        assertEquals(30, s.test().size());
        assertEquals(kb.oneHopQuestions().size() + kb.twoHopQuestions().size() - 30, s.train().size());
        Set<String> testIds = new HashSet<>();
        s.test().forEach(q -> testIds.add(q.task().id()));
        assertTrue(s.train().stream().noneMatch(q -> testIds.contains(q.task().id())));
        assertEquals(kb.oneHopQuestions().size() - 10, kb.split(false, 10, 1).train().size());
        assertThrows(IllegalArgumentException.class, () -> kb.split(false, kb.oneHopQuestions().size(), 1));
    }
}
