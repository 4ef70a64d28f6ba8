// KnowledgeBaseData.java — `data.synthetic:` of the search workflow: the size of the built-in world
// (made-up countries, cities, companies and people; see KnowledgeBase) and
// which questions are asked, with its own seed so runs of different run.seed share their tasks.
package dev.drmas.workflow.search;

import dev.drmas.config.Check;

/**
 * @param countries  countries; default 8
 * @param cities     cities, each in a country; default 30
 * @param companies  companies, each based in a city; default 40
 * @param people     people, each born in a city and working for a company; default 150
 * @param twoHop     also ask 2-hop questions (two searches needed); default true
 * @param testSize   questions held out for evaluation; default 100
 * @param seed       the world's seed; default 4321
 */
public record KnowledgeBaseData(int countries, int cities, int companies, int people, boolean twoHop, int testSize,
                                long seed) {
    public KnowledgeBaseData {
        Check.positive(countries, "countries");
        Check.positive(cities, "cities");
        Check.positive(companies, "companies");
        Check.positive(people, "people");
        Check.nonNegative(testSize, "test_size");
        // questions: 1 per city and company, 2 per person, and 2 more per person with two_hop
        long questions = cities + companies + 2L * people + (twoHop ? 2L * people : 0);
        Check.that(testSize < questions, "test_size", "(" + testSize + ") must leave training questions: this world has "
                + questions + " questions");
    }

    public static KnowledgeBaseData defaults() {
        return new KnowledgeBaseData(8, 30, 40, 150, true, 100, 4321);
    }
}
