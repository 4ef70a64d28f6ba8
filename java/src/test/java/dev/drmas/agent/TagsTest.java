// TagsTest.java — Tags.Tag.last, the one-pass lookup of a tag's last span, against the regex find
// loop it replaced (open(.*?)close, DOTALL) on many generated replies: random mixes of opening and
// closing tags in every spelling (case, spaces, line breaks), other tags, broken tags and text,
// nested and unclosed. A 1 MB reply of unclosed opening tags, which the loop took quadratic time
// over, gets the loop's answer. The workflows' own tags are checked with these helpers in their tests.
package dev.drmas.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

public class TagsTest {
    /** Pieces of the generated replies: the workflows' tags in many spellings, near misses, text. */
    static final String[] PIECES = {"<verify>", "<VERIFY>", "< verify >", "<\tVeRiFy\n>", "</verify>", "< / verify >", "</ VERIFY>",
        "<\n/\nverify\n>", "<verify", "verify>", "</", "<", ">", "/", " ", "\n", "approve", "reject", "x", "<answer>", "</answer>",
        "<Answer>", "</answer >", "<search>", "</search>", "< search>", "<search><search>", "</search></search>", "ü", "\r\n"};

    /** Group 1 of the last match of {@code old}: the find loop the workflows used before Tags.Tag. */
    public static String regexLoop(Pattern old, String text) {
        Matcher m = old.matcher(text);
        String last = null;
        while (m.find()) last = m.group(1);
        return last;
    }

    /** {@code tag.last} gives the regex loop's answer on {@code n} generated replies. */
    public static void assertAsRegexLoop(Tags.Tag tag, Pattern old, int n, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int i = 0; i < n; i++) {
            StringBuilder sb = new StringBuilder();
            int pieces = rnd.nextInt(i % 10 == 0 ? 200 : 25);
            for (int k = 0; k < pieces; k++) sb.append(PIECES[rnd.nextInt(PIECES.length)]);
            String text = sb.toString();
            assertEquals(regexLoop(old, text), tag.last(text), () -> "reply " + java.util.Arrays.toString(text.getBytes()));
        }
    }

    /** {@code unit} repeated until the text has at least {@code chars} characters. */
    public static String repeated(String unit, int chars) {
        return unit.repeat((chars + unit.length() - 1) / unit.length());
    }

    static final Tags.Tag VERIFY = Tags.Tag.of("<\\s*verify\\s*>", "<\\s*/\\s*verify\\s*>", Pattern.CASE_INSENSITIVE);
    static final Pattern VERIFY_OLD = Pattern.compile("<\\s*verify\\s*>(.*?)<\\s*/\\s*verify\\s*>", Pattern.CASE_INSENSITIVE | Pattern.DOTALL);
    static final Tags.Tag SEARCH = Tags.Tag.of("<search>", "</search>", 0);
    static final Pattern SEARCH_OLD = Pattern.compile("<search>(.*?)</search>", Pattern.DOTALL);

    @Test
    void theLastSpanIsTheRegexLoops() {
        assertAsRegexLoop(VERIFY, VERIFY_OLD, 20000, 1);
        assertAsRegexLoop(SEARCH, SEARCH_OLD, 20000, 2);
    }

    @Test
    void handPickedReplies() {
        // the first closing tag ends a span, even with an opening tag inside it
        assertEquals(" a <verify> b ", VERIFY.last("<verify> a <verify> b </verify> c </verify>"));
        assertEquals("b", VERIFY.last("<verify>a</verify><VERIFY>b< / Verify >"));
        assertEquals("", VERIFY.last("<verify></verify>"));
        assertEquals("x\ny", VERIFY.last("<verify>x\ny</verify><verify>unclosed"));
        assertNull(VERIFY.last("</verify><verify>"));
        assertNull(VERIFY.last(""));
        assertEquals("<search>q", SEARCH.last("<search><search>q</search>"));
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)  // a hang guard only: the old loop took minutes here
    void aMegabyteOfUnclosedOpeningTags() {
        String reply = repeated("<verify> approve ", 1 << 20);
        assertNull(VERIFY.last(reply));
        // closed once: the span runs from the first opening tag (compared without printing a megabyte)
        assertTrue(reply.substring(8).equals(VERIFY.last(reply + "</verify>")));
        assertTrue((reply + "<verify> approve ").substring(8).equals(VERIFY.last(reply + "<verify> approve </verify>" + reply)));
        assertEquals(" approve ", VERIFY.last(reply + "</verify><verify> approve </verify>" + reply));
        assertNull(SEARCH.last(repeated("<search> q ", 1 << 20)));
    }
}
