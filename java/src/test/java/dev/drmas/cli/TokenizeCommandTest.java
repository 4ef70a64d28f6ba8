// TokenizeCommandTest.java — `drmas tokenize` end to end through picocli on a real tokenizer folder
// (the built-in one, written to a temporary folder): ids as one JSON line, --chat through ChatML,
// --decode in both id syntaxes, --skip-special, text outside ASCII under the C locale (a child JVM),
// and each user error with its message and exit 1 (a chat template that fails names its file).
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.testing.Fixtures;
import dev.drmas.tokenizer.BuiltinTokenizer;
import dev.drmas.tokenizer.HfTokenizer;
import java.io.IOException;
import java.nio.file.Path;
import java.util.StringJoiner;
import java.util.Arrays;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenizeCommandTest {
    @TempDir
    static Path dir;
    static HfTokenizer tok; // the same folder, to translate between text and ids in expectations

    @BeforeAll
    static void writeTokenizer() {
        BuiltinTokenizer.writeTo(dir);
        tok = HfTokenizer.load(dir);
    }

    @AfterAll
    static void close() {
        tok.close();
    }



    /** The ids of {@code pieces}, each a single token of the built-in tokenizer. */
    static int[] ids(String... pieces) {
        return Arrays.stream(pieces).mapToInt(p -> tok.tokenId(p).getAsInt()).toArray();
    }

    static int[] chars(String s) {
        return s.chars().map(c -> tok.tokenId(String.valueOf((char) c)).getAsInt()).toArray();
    }

    static int[] concat(int[]... parts) {
        return Arrays.stream(parts).flatMapToInt(Arrays::stream).toArray();
    }

    static String json(int[] ids) {
        return Arrays.stream(ids).mapToObj(Integer::toString).collect(Collectors.joining(",", "[", "]"));
    }

    @Test
    void printsTheIdsAsOneJsonLine() throws IOException {
        Cli.Run r = Cli.run("tokenize", "--tokenizer", dir.toString(), "<answer>12+3</answer>");
        assertEquals(0, r.exit(), r.err());
        int[] expected = concat(ids("<answer>"), chars("12+3"), ids("</answer>"));
        assertEquals(json(expected) + System.lineSeparator(), r.out());
        assertEquals(expected.length, new ObjectMapper().readTree(r.out()).size()); // valid JSON
    }

    @Test
    void chatRendersOneUserMessageWithTheGenerationPrompt() {
        Cli.Run r = Cli.run("tokenize", "--tokenizer", dir.toString(), "--chat", "2*4");
        assertEquals(0, r.exit(), r.err());
        // <|im_start|>user\n2*4<|im_end|>\n<|im_start|>assistant\n
        int[] expected = concat(ids("<|im_start|>"), chars("user\n2*4"), ids("<|im_end|>"), chars("\n"), ids("<|im_start|>"),
                chars("assistant\n"));
        assertEquals(json(expected) + System.lineSeparator(), r.out());
    }

    @Test
    void decodesJsonArraysAndCommaLists() {
        int[] ids = concat(ids("<|im_start|>"), chars("hi\n"), ids("<think>"), tok.encode("é"), ids("</think>", "<|im_end|>"));
        Cli.Run r = Cli.run("tokenize", "--tokenizer", dir.toString(), "--decode", json(ids));
        assertEquals(0, r.exit(), r.err());
        assertEquals("<|im_start|>hi\n<think>é</think><|im_end|>" + System.lineSeparator(), r.out());

        String commas = Arrays.stream(ids).mapToObj(Integer::toString).collect(Collectors.joining(", "));
        r = Cli.run("tokenize", "--tokenizer", dir.toString(), "--decode", commas, "--skip-special");
        assertEquals(0, r.exit(), r.err());
        assertEquals("hi\n<think>é</think>" + System.lineSeparator(), r.out());

        r = Cli.run("tokenize", "--tokenizer", dir.toString(), "--decode", "[]");
        assertEquals(System.lineSeparator(), r.out());
    }

    @Test
    void badIdsAreUserErrors() {
        Cli.Run r = Cli.run("tokenize", "--tokenizer", dir.toString(), "--decode", "[1, x, 3]");
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("--decode: item 2 'x' is not a token id"), r.err());

        r = Cli.run("tokenize", "--tokenizer", dir.toString(), "--decode", "1,366");
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("token id 366 is outside the vocabulary (ids 0..365)"), r.err());

        r = Cli.run("tokenize", "--tokenizer", dir.toString(), "--decode", "[-1]");
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("token id -1 is outside the vocabulary"), r.err());

        r = Cli.run("tokenize", "--tokenizer", dir.toString(), "--decode", "[1,2");
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("unbalanced brackets"), r.err());
        assertEquals("", r.out());
    }

    @Test
    void missingTokenizerFolderIsAUserError() {
        Path missing = dir.resolve("no-such-tokenizer");
        Cli.Run r = Cli.run("tokenize", "--tokenizer", missing.toString(), "hello");
        assertEquals(1, r.exit());
        assertTrue(r.err().contains(missing + ": no such directory"), r.err());
    }

    @Test
    void textAndDecodeAreExclusive() {
        assertEquals(1, Cli.run("tokenize", "--tokenizer", dir.toString()).exit());
        Cli.Run r = Cli.run("tokenize", "--tokenizer", dir.toString(), "--decode", "[1]", "text");
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("either TEXT to encode or --decode IDS"), r.err());
        assertEquals(1, Cli.run("tokenize", "--tokenizer", dir.toString(), "--chat", "--decode", "[1]").exit());
        assertEquals(1, Cli.run("tokenize", "--tokenizer", dir.toString(), "--skip-special", "text").exit());
    }

    @Test
    void chatWithATemplatedTokenizerRendersItsTemplate() throws Exception {
        Path qwen3 = Fixtures.qwen3Tokenizer();
        Cli.Run r = Cli.run("tokenize", "--tokenizer", qwen3.toString(), "--chat", "hi");
        assertEquals(0, r.exit(), r.err());
        // Qwen3's template for one user message with the generation prompt (thinking not disabled)
        try (HfTokenizer q = HfTokenizer.load(qwen3)) {
            StringJoiner want = new StringJoiner(",", "[", "]");
            for (int id : q.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")) want.add(Integer.toString(id));
            assertEquals(want + System.lineSeparator(), r.out());
        }
    }

    @Test
    void templateArgsReachTheChatTemplate() throws Exception {
        Path qwen3 = Fixtures.qwen3Tokenizer();
        Cli.Run r = Cli.run("tokenize", "--tokenizer", qwen3.toString(), "--chat", "--template-arg", "enable_thinking=false", "hi");
        assertEquals(0, r.exit(), r.err());
        try (HfTokenizer q = HfTokenizer.load(qwen3)) {
            // transformers' apply_chat_template(..., add_generation_prompt=True, enable_thinking=False)
            assertEquals(json(q.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"))
                    + System.lineSeparator(), r.out());
        }
        // values are YAML: a list, a mapping, a quoted string that would otherwise be a boolean; repeatable
        Path shown = withTemplate(dir.resolve("shows-args"), "{{ xs | tojson }} {{ m.k }} {{ s is string }} {{ n + 1 }}");
        r = Cli.run("tokenize", "--tokenizer", shown.toString(), "--chat", "--template-arg", "xs=[1, a]", "--template-arg", "m={k: v}",
                "--template-arg", "s='true'", "--template-arg", "n=41", "hi");
        assertEquals(0, r.exit(), r.err());
        assertEquals(json(tok.encode("[1, \"a\"] v True 42")) + System.lineSeparator(), r.out());
    }

    @Test
    void badTemplateArgsAreUserErrors() throws Exception {
        Path qwen3 = Fixtures.qwen3Tokenizer();
        String[][] cases = {
            {"enable_thinking", "--template-arg 'enable_thinking': expected NAME=VALUE, e.g. enable_thinking=false"},
            {"eos_token=x", "--template-arg 'eos_token=x': 'eos_token' is set by drmas's chat renderer itself"},
            {"enable-thinking=false", "--template-arg 'enable-thinking=false': 'enable-thinking' is not a template variable name"},
            {"x=[1", "--template-arg 'x=[1': the value is not valid YAML"},
        };
        for (String[] c : cases) {
            Cli.Run r = Cli.run("tokenize", "--tokenizer", qwen3.toString(), "--chat", "--template-arg", c[0], "hi");
            assertEquals(1, r.exit(), r.err());
            assertTrue(r.err().contains("drmas tokenize: " + c[1]), r.err());
            assertEquals("", r.out());
        }
        Cli.Run twice = Cli.run("tokenize", "--tokenizer", qwen3.toString(), "--chat", "--template-arg", "a=1", "--template-arg", "a=2", "hi");
        assertEquals(1, twice.exit());
        assertTrue(twice.err().contains("--template-arg 'a=2': 'a' is given twice"), twice.err());
        Cli.Run noChat = Cli.run("tokenize", "--tokenizer", qwen3.toString(), "--template-arg", "enable_thinking=false", "hi");
        assertEquals(1, noChat.exit());
        assertTrue(noChat.err().contains("--template-arg applies to --chat only"), noChat.err());
        // the built-in tokenizer has no template: ChatML reads no variables, so the argument would be lost
        Cli.Run chatMl = Cli.run("tokenize", "--tokenizer", dir.toString(), "--chat", "--template-arg", "enable_thinking=false", "hi");
        assertEquals(1, chatMl.exit());
        assertTrue(chatMl.err().contains("--template-arg: " + dir + ": the tokenizer has no chat template"), chatMl.err());
    }

    @Test
    void textOutsideAsciiIsEncodedUnderTheCLocale() throws Exception {
        // A child JVM under LC_ALL=C (the locale of many containers), given the text's UTF-8 bytes by the
        // shell, so that this JVM's own locale does not matter. The JVM decodes such arguments as ASCII.
        String bytes = "h\\303\\251llo \\360\\237\\230\\200";  // "héllo 😀" in UTF-8, as printf octal escapes
        Child.Result r = Child.shell(dir, "export LC_ALL=C; set -- \"$@\" \"$(printf '" + bytes + "')\";", "", 120,
                "tokenize", "--tokenizer", dir.toString());
        assertEquals(0, r.exit(), r.err());
        assertEquals(json(tok.encode("h\u00e9llo \ud83d\ude00")), r.out().strip());
    }

    /** The built-in tokenizer in a folder of its own, with {@code template} as tokenizer_config.json's chat_template. */
    static Path withTemplate(Path folder, String template) throws IOException {
        BuiltinTokenizer.writeTo(folder);
        ObjectMapper m = new ObjectMapper();
        Path cfg = folder.resolve("tokenizer_config.json");
        var node = (com.fasterxml.jackson.databind.node.ObjectNode) m.readTree(cfg.toFile());
        node.put("chat_template", template);
        m.writeValue(cfg.toFile(), node);
        return folder;
    }

    @Test
    void aChatTemplateThatFailsIsAUserErrorNamingTheFile(@TempDir Path other) throws IOException {
        Path broken = withTemplate(other.resolve("raises"), "{{ raise_exception('roles must alternate') }}");
        Cli.Run r = Cli.run("tokenize", "--tokenizer", broken.toString(), "--chat", "hi");
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(broken.resolve("tokenizer_config.json").toString()) && r.err().contains("roles must alternate")
                && r.err().contains("line 1:"), r.err());
        Path syntax = withTemplate(other.resolve("syntax"), "{% if %}x{% endif %}");
        r = Cli.run("tokenize", "--tokenizer", syntax.toString(), "--chat", "hi");
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(syntax.resolve("tokenizer_config.json").toString()), r.err());
    }
}
