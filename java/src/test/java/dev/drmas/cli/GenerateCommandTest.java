// GenerateCommandTest.java — `drmas generate` on a checkpoint folder written by the test (a tiny
// random Qwen3-layout model saved in HF layout next to the built-in tokenizer): the CLI's output
// equals what the rollout engine gives for the same settings, and bad input is a clear error.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.rollout.Completion;
import dev.drmas.rollout.GenerationConfig;
import dev.drmas.rollout.Generator;
import dev.drmas.rollout.Request;
import dev.drmas.rollout.SamplingParams;
import dev.drmas.tokenizer.BuiltinTokenizer;
import dev.drmas.tokenizer.HfTokenizer;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class GenerateCommandTest {
    @TempDir
    static Path dir;

    @BeforeAll
    static void checkpoint() throws Exception {
        BuiltinTokenizer.writeTo(dir);
        int vocab;
        try (HfTokenizer tok = HfTokenizer.load(dir)) {
            vocab = tok.vocabSize();
        }
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, vocab), 21)) {
            m.save(dir);
        }
    }



    @Test
    void printsWhatTheEngineGenerates() throws Exception {
        Cli.Run r = Cli.run("generate", "--model", dir.toString(), "--prompt", "12+30=", "--max-new-tokens", "6",
                "--temperature", "0.8", "--top-p", "0.9", "--seed", "5", "--json");
        assertEquals(0, r.exit(), r.err());
        JsonNode o = new ObjectMapper().readTree(r.out());
        try (HfTokenizer tok = HfTokenizer.load(dir); CausalLm m = CausalLm.load(dir)) {
            int[] prompt = tok.encode("12+30=");
            assertArrayEquals(prompt, new ObjectMapper().treeToValue(o.get("prompt_ids"), int[].class));
            GenerationConfig cfg = new GenerationConfig(new SamplingParams(0.8, 0, 0.9), 6,
                    new HashSet<>(tok.stopTokenIds()), List.of(), null, 5, true, 0);
            Completion c = new Generator(m).generate(List.of(new Request(prompt, 0)), cfg).get(0);
            assertArrayEquals(c.tokens(), new ObjectMapper().treeToValue(o.get("ids"), int[].class));
            assertEquals(tok.decode(c.tokens(), true), o.get("text").asText());
            assertEquals(c.finishReason().name().toLowerCase(), o.get("finish_reason").asText());
            assertEquals(c.length(), o.get("logprobs").size());
        }
        // the plain form prints the same text
        Cli.Run plain = Cli.run("generate", "--model", dir.toString(), "--prompt", "12+30=", "--max-new-tokens", "6",
                "--temperature", "0.8", "--top-p", "0.9", "--seed", "5");
        assertEquals(o.get("text").asText() + System.lineSeparator(), plain.out());
    }

    @Test
    void theFinishReasonIsTheSameWordInATurkishLocale() throws Exception {
        // the first greedy token's own text as the stop string: generation stops there, by the string
        JsonNode first = new ObjectMapper().readTree(Cli.run("generate", "--model", dir.toString(), "--prompt", "12+30=",
                "--max-new-tokens", "1", "--json").out());
        int id = first.get("ids").get(0).asInt();
        String stop;
        try (HfTokenizer tok = HfTokenizer.load(dir)) {
            org.junit.jupiter.api.Assumptions.assumeFalse(tok.stopTokenIds().contains(id), "the first token is a stop token");
            stop = tok.decode(new int[] {id}, false);
        }
        java.util.Locale before = java.util.Locale.getDefault();
        try {
            java.util.Locale.setDefault(java.util.Locale.forLanguageTag("tr-TR"));  // where "I".toLowerCase() is "ı"
            Cli.Run r = Cli.run("generate", "--model", dir.toString(), "--prompt", "12+30=", "--max-new-tokens", "4",
                    "--stop", stop, "--json");
            assertEquals(0, r.exit(), r.err());
            assertEquals("stop_string", new ObjectMapper().readTree(r.out()).get("finish_reason").asText());
        } finally {
            java.util.Locale.setDefault(before);
        }
    }

    @Test
    void chatRendersTheMessageFirst() throws Exception {
        Cli.Run r = Cli.run("generate", "--model", dir.toString(), "--prompt", "hi", "--chat", "--max-new-tokens", "2", "--json");
        assertEquals(0, r.exit(), r.err());
        try (HfTokenizer tok = HfTokenizer.load(dir)) {
            int[] want = tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
            assertArrayEquals(want, new ObjectMapper().treeToValue(new ObjectMapper().readTree(r.out()).get("prompt_ids"), int[].class));
        }
    }

    @Test
    void templateArgsReachTheChatTemplate(@TempDir Path other) throws Exception {
        // the built-in tokenizer (this model's ids) with a template that reads enable_thinking as Qwen3's does
        Path tokDir = TokenizeCommandTest.withTemplate(other, "{{ messages[0].content }}\n{% if enable_thinking is defined and "
                + "enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}");
        Cli.Run r = Cli.run("generate", "--model", dir.toString(), "--tokenizer", tokDir.toString(), "--prompt", "hi", "--chat",
                "--template-arg", "enable_thinking=false", "--max-new-tokens", "2", "--json");
        assertEquals(0, r.exit(), r.err());
        try (HfTokenizer tok = HfTokenizer.load(dir)) {
            int[] want = tok.encode("hi\n<think>\n\n</think>\n\n");
            assertArrayEquals(want, new ObjectMapper().treeToValue(new ObjectMapper().readTree(r.out()).get("prompt_ids"), int[].class));
        }
        Cli.Run noChat = Cli.run("generate", "--model", dir.toString(), "--prompt", "hi", "--template-arg", "enable_thinking=false");
        assertEquals(1, noChat.exit(), noChat.err());
        assertTrue(noChat.err().contains("--template-arg applies to --chat only"), noChat.err());
        Cli.Run chatMl = Cli.run("generate", "--model", dir.toString(), "--prompt", "hi", "--chat", "--template-arg", "enable_thinking=false");
        assertEquals(1, chatMl.exit(), chatMl.err());
        assertTrue(chatMl.err().contains("--template-arg: " + dir + ": the tokenizer has no chat template"), chatMl.err());
    }

    @Test
    void badInputIsAClearError() {
        Cli.Run missing = Cli.run("generate", "--model", dir.resolve("nope").toString(), "--prompt", "x");
        assertEquals(1, missing.exit(), missing.err());
        assertTrue(missing.err().contains("nope"), missing.err());
        Cli.Run topP = Cli.run("generate", "--model", dir.toString(), "--prompt", "x", "--top-p", "0");
        assertEquals(1, topP.exit(), topP.err());
        assertTrue(topP.err().contains("--top-p must be in (0, 1]"), topP.err());
        Cli.Run budget = Cli.run("generate", "--model", dir.toString(), "--prompt", "x", "--max-new-tokens", "0");
        assertEquals(1, budget.exit(), budget.err());
        assertTrue(budget.err().contains("--max-new-tokens must be >= 1"), budget.err());
        Cli.Run tiny = Cli.run("generate", "--model", dir.toString(), "--prompt", "x", "--temperature", "1e-40");
        assertEquals(1, tiny.exit(), tiny.err());
        assertTrue(tiny.err().contains("--temperature must be 0 (greedy) or >= 1.0E-5"), tiny.err());
        Cli.Run stop = Cli.run("generate", "--model", dir.toString(), "--prompt", "x", "--stop", "");
        assertEquals(1, stop.exit(), stop.err());
        assertTrue(stop.err().contains("--stop must not be empty"), stop.err());
    }

    @Test
    void aTokenizerWhoseIdsThisModelDoesNotHaveIsAUserError(@TempDir Path small) throws Exception {
        // a model of 100 ids with the built-in tokenizer's 366: '~' is id 109
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, 100), 4)) {
            m.save(small);
        }
        Cli.Run r = Cli.run("generate", "--model", small.toString(), "--tokenizer", dir.toString(), "--prompt", "a~", "--max-new-tokens", "2");
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("--prompt: token 1 is id 109 of the tokenizer in " + dir) && r.err().contains("100")
                && r.err().contains(small.resolve("config.json").toString()), r.err());
    }

    @Test
    void aChatTemplateThatFailsIsAUserErrorNamingTheFile(@TempDir Path other) throws Exception {
        Path tok = TokenizeCommandTest.withTemplate(other, "{{ raise_exception('no system role') }}");
        Cli.Run r = Cli.run("generate", "--model", dir.toString(), "--tokenizer", tok.toString(), "--chat", "--prompt", "1+1=",
                "--max-new-tokens", "2");
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(tok.resolve("tokenizer_config.json").toString()) && r.err().contains("no system role"), r.err());
    }
}
