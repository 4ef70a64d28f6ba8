// KnowledgeBase.java — the built-in world of the search workload, so that the default search run
// needs no download: made-up countries, cities, companies and people linked by relations (a city
// lies in a country, a company is based in a city, a person was born in a city and works for a
// company). It writes one short passage per city, company and person, and asks 1-hop questions
// (one passage answers them) and 2-hop questions (the first passage names the entity whose passage
// holds the answer). Every name is one invented word used by no other entity, so a query that names
// an entity finds its passage; the same seed gives the same world, corpus and questions.
package dev.drmas.workflow.search;

import dev.drmas.env.Task;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;

public final class KnowledgeBase {
    /**
     * A question with what a perfect team would do: search for each entity of {@code hops} in turn,
     * then answer.
     *
     * @param task            question, gold answer (and aliases)
     * @param hops            the entity names to search for, in order (1 or 2)
     * @param goldPassageIds  the passages that hold each hop's fact, in order
     */
    public record Question(Task task, List<String> hops, List<String> goldPassageIds) {
        public Question {
            hops = List.copyOf(hops);
            goldPassageIds = List.copyOf(goldPassageIds);
        }

        public int hopCount() {
            return hops.size();
        }
    }

    /** Sizes of the world; every count ≥ 1. */
    public record Sizes(int countries, int cities, int companies, int people) {
        public Sizes {
            if (countries < 1 || cities < 1 || companies < 1 || people < 1) {
                throw new IllegalArgumentException("knowledge base sizes must be >= 1, got " + this);
            }
        }
    }

    private final List<Passage> passages = new ArrayList<>();
    private final List<Question> oneHop = new ArrayList<>();
    private final List<Question> twoHop = new ArrayList<>();

    private KnowledgeBase() {
    }

    /** The world of {@code sizes} drawn from {@code seed}. */
    public static KnowledgeBase generate(Sizes sizes, long seed) {
        KnowledgeBase kb = new KnowledgeBase();
        SplittableRandom rng = new SplittableRandom(seed);
        Names names = new Names(rng);
        String[] country = new String[sizes.countries()];
        for (int i = 0; i < country.length; i++) country[i] = names.next(2);
        String[] city = new String[sizes.cities()];
        int[] cityCountry = new int[city.length];
        for (int i = 0; i < city.length; i++) {
            city[i] = names.next(2);
            cityCountry[i] = i < country.length ? i : rng.nextInt(country.length);  // every country has a city
        }
        String[] company = new String[sizes.companies()];
        int[] companyCity = new int[company.length];
        for (int i = 0; i < company.length; i++) {
            company[i] = names.next(2);
            companyCity[i] = rng.nextInt(city.length);
        }
        String[] person = new String[sizes.people()];
        int[] born = new int[person.length], employer = new int[person.length];
        for (int i = 0; i < person.length; i++) {
            person[i] = names.next(2) + " " + names.next(2);
            born[i] = rng.nextInt(city.length);
            employer[i] = rng.nextInt(company.length);
        }
        for (int i = 0; i < city.length; i++) {
            kb.passages.add(new Passage("city-" + i, city[i], city[i] + " is a city in " + country[cityCountry[i]] + "."));
        }
        for (int i = 0; i < company.length; i++) {
            kb.passages.add(new Passage("company-" + i, company[i], company[i] + " is a company based in " + city[companyCity[i]] + "."));
        }
        for (int i = 0; i < person.length; i++) {
            kb.passages.add(new Passage("person-" + i, person[i],
                    person[i] + " was born in " + city[born[i]] + " and works for " + company[employer[i]] + "."));
        }
        int q = 0;
        for (int i = 0; i < city.length; i++) {
            kb.oneHop.add(question(q++, "Which country is " + city[i] + " in?", country[cityCountry[i]],
                    List.of(city[i]), List.of("city-" + i)));
        }
        for (int i = 0; i < company.length; i++) {
            kb.oneHop.add(question(q++, "Where is " + company[i] + " based?", city[companyCity[i]],
                    List.of(company[i]), List.of("company-" + i)));
        }
        for (int i = 0; i < person.length; i++) {
            kb.oneHop.add(question(q++, "Where was " + person[i] + " born?", city[born[i]],
                    List.of(person[i]), List.of("person-" + i)));
            kb.oneHop.add(question(q++, "Who does " + person[i] + " work for?", company[employer[i]],
                    List.of(person[i]), List.of("person-" + i)));
        }
        for (int i = 0; i < person.length; i++) {
            int c = born[i], e = employer[i];
            kb.twoHop.add(question(q++, "Which country was " + person[i] + " born in?", country[cityCountry[c]],
                    List.of(person[i], city[c]), List.of("person-" + i, "city-" + c)));
            kb.twoHop.add(question(q++, "Where is the employer of " + person[i] + " based?", city[companyCity[e]],
                    List.of(person[i], company[e]), List.of("person-" + i, "company-" + e)));
        }
        return kb;
    }

    private static Question question(int n, String text, String answer, List<String> hops, List<String> gold) {
        return new Question(new Task("kb-" + n, text, answer), hops, gold);
    }

    /** The passage corpus: cities, then companies, then people. */
    public List<Passage> passages() {
        return List.copyOf(passages);
    }

    public List<Question> oneHopQuestions() {
        return List.copyOf(oneHop);
    }

    public List<Question> twoHopQuestions() {
        return List.copyOf(twoHop);
    }

    /** A held-out split of the questions. */
    public record Split(List<Question> train, List<Question> test) {}

    /**
     * The questions (1-hop, and 2-hop when {@code twoHop}) shuffled by {@code seed}: the first
     * {@code testSize} are held out, the rest train. The test size must leave at least one
     * training question.
     */
    public Split split(boolean twoHop, int testSize, long seed) {
        List<Question> all = new ArrayList<>(oneHop);
        if (twoHop) all.addAll(this.twoHop);
        if (testSize < 0 || testSize >= all.size()) {
            throw new IllegalArgumentException("test_size " + testSize + " must be in [0, " + (all.size() - 1)
                    + "]: the knowledge base has " + all.size() + " questions");
        }
        SplittableRandom rng = new SplittableRandom(seed);
        for (int i = all.size() - 1; i > 0; i--) {
            int j = rng.nextInt(i + 1);
            Question t = all.get(i);
            all.set(i, all.get(j));
            all.set(j, t);
        }
        return new Split(List.copyOf(all.subList(testSize, all.size())), List.copyOf(all.subList(0, testSize)));
    }

    /**
     * Invented words: syllables of a consonant and a vowel, capitalised, never repeated, so that
     * each name is a term of its own for BM25 and a short string of ASCII letters for a
     * character-level tokenizer.
     */
    private static final class Names {
        private static final String CONSONANTS = "bdfgklmnprstvz";
        private static final String VOWELS = "aeiou";
        private final SplittableRandom rng;
        private final Set<String> used = new HashSet<>();

        Names(SplittableRandom rng) {
            this.rng = rng;
            // nor may a name stem like a word of the passages and questions ("Base" vs "based")
            used.addAll(Bm25Retriever.terms("is a city in country company based was born and works for which where who "
                    + "does work the employer of"));
        }

        String next(int syllables) {
            for (int attempt = 0; ; attempt++) {
                StringBuilder sb = new StringBuilder();
                int n = syllables + (attempt > 50 ? attempt / 50 : 0);  // a crowded space grows longer names
                for (int s = 0; s < n; s++) {
                    sb.append(CONSONANTS.charAt(rng.nextInt(CONSONANTS.length())));
                    sb.append(VOWELS.charAt(rng.nextInt(VOWELS.length())));
                }
                if (rng.nextBoolean()) sb.append(CONSONANTS.charAt(rng.nextInt(CONSONANTS.length())));
                String w = Character.toUpperCase(sb.charAt(0)) + sb.substring(1);
                // "A"/"An"/"The"-like words would be dropped by answer normalisation or stop words
                // unique after analysis: two names that stem alike ("Kelo", "Kelos") would be one term to BM25
                List<String> terms = Bm25Retriever.terms(w);
                if (w.length() >= 3 && terms.size() == 1 && used.add(terms.get(0))) return w;
            }
        }
    }
}
