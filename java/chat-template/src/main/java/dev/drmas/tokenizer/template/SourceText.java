// SourceText.java — a template's source after jinja2's newline normalisation, plus the line
// starts that turn a char offset into the line:col every TemplateException names.
package dev.drmas.tokenizer.template;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

final class SourceText {
    final String text;
    private final int[] lineStarts;

    private SourceText(String text) {
        this.text = text;
        List<Integer> starts = new ArrayList<>();
        starts.add(0);
        for (int i = 0; i < text.length(); i++) {
            if (text.charAt(i) == '\n') starts.add(i + 1);
        }
        lineStarts = starts.stream().mapToInt(Integer::intValue).toArray();
    }

    /**
     * jinja2 turns \r\n and \r into \n and, with keep_trailing_newline=False (HF's setting), drops
     * one trailing newline before lexing; offsets and line numbers refer to that text.
     */
    static SourceText of(String raw) {
        String text = raw.replace("\r\n", "\n").replace('\r', '\n');
        if (text.endsWith("\n")) text = text.substring(0, text.length() - 1);
        return new SourceText(text);
    }

    int line(int at) {
        int i = Arrays.binarySearch(lineStarts, at);
        return (i >= 0 ? i : -i - 2) + 1;
    }

    int column(int at) {
        return at - lineStarts[line(at) - 1] + 1;
    }

    TemplateException error(int at, String reason) {
        return new TemplateException(reason, line(at), column(at), false);
    }
}
