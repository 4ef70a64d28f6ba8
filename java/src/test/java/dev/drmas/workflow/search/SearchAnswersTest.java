// SearchAnswersTest.java — SQuAD/Search-R1 answer normalisation, exact match against any gold,
// token F1 and the episode reward from the last <answer> tag, on hand-checked cases.
package dev.drmas.workflow.search;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.TagsTest;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

class SearchAnswersTest {
    @Test
    void normalisesLikeSquad() {
        assertEquals("eiffel tower", SearchAnswers.normalize("The Eiffel  Tower!"));
        assertEquals("unitedstates", SearchAnswers.normalize("the United-States"), "as SQuAD: punctuation is dropped, not spaced");
        assertEquals("apple", SearchAnswers.normalize("  an Apple. "));
        assertEquals("theory", SearchAnswers.normalize("Theory"), "articles only as whole words");
        assertEquals("", SearchAnswers.normalize("The."));
    }

    @Test
    void articlesAsPythonReadsThem() {
        // Python's \b counts Unicode letters as word characters: no article inside "España" or "Théa"
        assertEquals("españa", SearchAnswers.normalize("España"));
        assertEquals("théa great", SearchAnswers.normalize("Théa the Great"));
        assertEquals("ça", SearchAnswers.normalize("ça a"));
        assertFalse(SearchAnswers.exactMatch("Españ", List.of("España")));
    }

    @Test
    void blanksAsPythonSplitsThem() {
        // str.split() splits at every Unicode blank, U+0085 and U+2028 included
        assertEquals("new york", SearchAnswers.normalize("New\u0085York"));
        assertEquals("new york", SearchAnswers.normalize("\u2028New\u2029York\u001f"));
        assertTrue(SearchAnswers.exactMatch("New\u2028York", List.of("New York")));
    }

    @Test
    void exactMatchAgainstAnyGold() {
        List<String> golds = List.of("New York City", "NYC");
        assertTrue(SearchAnswers.exactMatch("new york city.", golds));
        assertTrue(SearchAnswers.exactMatch("N.Y.C", golds));
        assertFalse(SearchAnswers.exactMatch("New York", golds));
    }

    @Test
    void f1IsTheBestTokenOverlap() {
        // "new york" vs "new york city": p = 1, r = 2/3, F1 = 0.8
        assertEquals(0.8, SearchAnswers.f1("New York", List.of("New York City", "Big Apple")), 1e-12);
        assertEquals(1.0, SearchAnswers.f1("the big apple", List.of("New York City", "Big Apple")), 1e-12);
        assertEquals(0.0, SearchAnswers.f1("Paris", List.of("Rome")), 0);
        assertEquals(0.0, SearchAnswers.f1("the", List.of("Rome")), 0, "no token after normalisation");
        // a repeated token counts as often as the gold has it: "x x y" vs "x y" has 2 in common, p = 2/3, r = 1
        assertEquals(2 * (2 / 3.0) * 1.0 / (2 / 3.0 + 1.0), SearchAnswers.f1("x x y", List.of("x y")), 1e-12);
    }

    @Test
    void rewardReadsTheLastAnswerTag() {
        assertEquals(Optional.of("Mirsk"), SearchAnswers.extractAnswer("<answer>Vandor</answer> hmm <answer> Mirsk </answer>"));
        assertEquals(Optional.empty(), SearchAnswers.extractAnswer("<answer> </answer>"));
        assertEquals(Optional.empty(), SearchAnswers.extractAnswer("Mirsk"));
        assertEquals(1.0, SearchAnswers.reward("<answer>mirsk</answer>", List.of("Mirsk")));
        assertEquals(0.0, SearchAnswers.reward("<answer>Mirsk City</answer>", List.of("Mirsk")));
        assertEquals(0.0, SearchAnswers.reward("Mirsk", List.of("Mirsk")), "no tag, no reward");
        assertEquals(0.0, SearchAnswers.reward(null, List.of("Mirsk")));
    }

    @Test
    void theAnswerAndSearchTagsAreReadAsTheRegexLoopReadThem() {
        // the patterns used before the one-pass lookup, spelled as they were
        TagsTest.assertAsRegexLoop(SearchAnswers.ANSWER, Pattern.compile("<answer>(.*?)</answer>", Pattern.DOTALL), 20000, 21);
        TagsTest.assertAsRegexLoop(SearchOrchestra.SEARCH_TAG, Pattern.compile("<search>(.*?)</search>", Pattern.DOTALL), 20000, 22);
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)  // a hang guard only: the regex loop took minutes here
    void aMegabyteOfUnclosedTagsHasNoAnswerOrQuery() {
        assertEquals(Optional.empty(), SearchAnswers.extractAnswer(TagsTest.repeated("<answer> Paris ", 1 << 20)));
        assertEquals(Optional.empty(), SearchOrchestra.query(TagsTest.repeated("<search> capital ", 1 << 20)));
        assertEquals(Optional.of("Rome"), SearchAnswers.extractAnswer(TagsTest.repeated("<answer> x </answer>", 1 << 20) + "<answer> Rome </answer>"));
    }
}
