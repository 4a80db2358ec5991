"""The gate of automatic recollection (app/memory/recollection.select): what goes into the prompt, in what order,
and within what size, decided on the hits' margins, lexical coverage and fused scores."""

from datetime import UTC, datetime

from app.memory import recollection
from app.memory.recollection import Recollection, select

WHEN = datetime(2026, 5, 1, tzinfo=UTC)


def hit(content: str, score: float, *, margin: float = 0.0, coverage: float = 0.0, source: str = "archival") -> Recollection:
    return Recollection(source, content, WHEN, similarity=0.8, margin=margin, coverage=coverage, score=score)


def test_nothing_goes_in_unless_some_hit_is_relevant_on_its_own() -> None:
    # High fused scores are relative to the query's candidates: they say nothing about whether memory knows it.
    unrelated = [hit("the user likes tea", 0.95), hit("the user lives in Osaka", 0.9)]
    assert select(unrelated, k=10) == []


def test_hits_close_to_an_evident_one_come_along_best_first() -> None:
    question = hit("Gina: What dance did your team do at the contest?", 0.9, margin=0.1)
    answer = hit("Jon: A contemporary piece called Finding Freedom.", 0.8)  # no margin, no shared words
    chatter = hit("Jon: I got new shoes.", 0.5)
    chosen = select([answer, chatter, question], k=10)
    assert chosen == [question, answer]
    # A lone answer, with no evident hit beside it, is not enough.
    assert select([answer, chatter], k=10) == []


def test_company_is_judged_against_the_best_hit_of_the_same_memory() -> None:
    # Archival and conversation scores come from separate searches: neither's best sets the other's bar.
    archival = [hit("a", 0.9, margin=0.1), hit("b", 0.3)]
    conversation = [hit("c", 0.4, source="conversation", coverage=0.8), hit("d", 0.35, source="conversation")]
    chosen = [r.content for r in select(archival + conversation, k=10)]
    assert chosen == ["a", "c", "d"]


def test_evident_hits_go_in_as_far_as_the_scores_stay_close_to_the_best() -> None:
    # One clear answer, far ahead of other hits that merely share the question's words: the answer alone.
    clear = [
        hit("Jon: My dog is called Rex", 0.9, margin=0.1),
        hit("Jon: a dog show", 0.5, coverage=0.8),
        hit("dogs", 0.45, coverage=0.8),
    ]
    assert [r.content for r in select(clear, k=15)] == ["Jon: My dog is called Rex"]
    # An answer spread over turns that score alike: all that stay within EVIDENT_RATIO of the best.
    ratio = recollection.EVIDENT_RATIO
    spread = [hit(f"turn {i}", 0.9 * (1 - i * (1 - ratio) / 4), margin=0.1) for i in range(4)] + [
        hit("turn 4", 0.9 * ratio - 0.01, margin=0.1)
    ]
    assert [r.content for r in select(spread, k=15)] == ["turn 0", "turn 1", "turn 2", "turn 3"]
    # Judged against the best evident hit of its memory: one that outscores it without being evident (a bonus, a
    # strong lexical share) does not push out what opened the gate.
    loud = hit("Jon: dogs, dogs, dogs", 1.5)
    assert [r.content for r in select([loud, *clear], k=15)] == ["Jon: dogs, dogs, dogs", "Jon: My dog is called Rex"]
    # Judged against the best hit of its own memory, as company is.
    other = hit("user: my dog Rex", 0.3, source="conversation", margin=0.1)
    assert other in select([*clear, other], k=15)


def test_at_most_k_and_the_character_budget_as_rendered_the_first_always_fits() -> None:
    hits = [hit(f"memory {i} " + "x" * 200, 1 - i / 100, margin=0.1) for i in range(10)]
    assert len(select(hits, k=3)) == 3
    # a heading of 12 characters, items of 211, each with its newline: 13 + 3 x 212 = 649, a fourth makes 861
    chosen = select(hits, k=10, budget=720)
    assert len(chosen) == 3 and len(recollection.render(chosen) or "") <= 720
    # at 870, a fourth item of the same day fits (861); one of another day, with its heading (874), does not
    assert len(select(hits[:4], k=10, budget=870)) == 4
    other_day = hit(hits[3].content, hits[3].score, margin=0.1)
    other_day.occurred_at = datetime(2026, 5, 2, tzinfo=UTC)
    assert select([*hits[:3], other_day], k=10, budget=870) == hits[:3]
    huge = hit("y" * 5000, 0.9, margin=0.2)
    [only] = select([huge], k=10, budget=100)
    assert len(only.item) < len(huge.content)  # cut to RECOLLECTION_CHARS


def test_a_hit_too_long_for_what_is_left_gives_way_to_a_shorter_one() -> None:
    first = hit("a" * 300, 0.9, margin=0.1)
    long, short, shorter = hit("b" * 400, 0.85), hit("c" * 100, 0.8), hit("d" * 50, 0.75)
    # 13 + 303 = 316; the long one would make 719 > 600: the next two fit (419, 472)
    assert select([first, long, short, shorter], k=10, budget=600) == [first, short, shorter]
    assert select([first, long, short, shorter], k=2, budget=600) == [first, short]


def test_the_rendering_labels_and_dates_each_memory_once_per_day_best_first() -> None:
    rendered = recollection.render([hit("The user's cat is named Mochi", 0.9, margin=0.1)])
    assert rendered == "[2026-05-01]\n- The user's cat is named Mochi"
    assert recollection.render([]) is None
    later = hit("user: I adopted a second cat", 0.8, source="conversation")
    later.occurred_at = datetime(2026, 6, 2, tzinfo=UTC)
    hits = [hit("Mochi is a tabby", 0.9, margin=0.1), later, hit("Mochi is three years old", 0.7)]
    assert recollection.render(hits) == (
        "[2026-05-01]\n- Mochi is a tabby\n- Mochi is three years old\n[conversation, 2026-06-02]\n- user: I adopted a second cat"
    )
