"""What the rows a query names gain in the hybrid statement (app/memory/search/hybrid.py): the rows from a time it
names, as candidates of their own, and the bonus of a row from a named date or said by a named speaker. The named
dates are bound as :named_from and :named_to (app/memory/search/named_dates.py), the speakers as :speakers
(app/memory/search/named_speakers.py).

A row from a date the query names ("on 3 May, 2023") gains DATE_SHARE: what was said then rarely says the date. A row
said by someone the query names (Caroline's lines for "What did Caroline…", the user's for "What did I…") gains
SPEAKER_SHARE. Both shares were chosen on the benchmark sets."""

from app.memory.search import bm25

# Added to the fused score of a row from a date the query names.
DATE_SHARE = 0.2
# Added to the fused score of a row said by someone the query names ("What did Caroline…"; "my…": the user's).
SPEAKER_SHARE = 0.1


def _within_named_dates(row: str) -> str:
    """Whether `row` (an alias) occurred within a span of the named dates."""
    return f"""EXISTS (
        SELECT 1 FROM unnest(CAST(:named_from AS timestamptz[]), CAST(:named_to AS timestamptz[])) AS d(start, stop)
        WHERE {row}.occurred_at >= d.start AND {row}.occurred_at < d.stop
    )"""


def dated(table: str, where: str, limit: int) -> str:
    """The CTE `dated`: the top `limit` rows from the named dates, nearest the query first. "What did I do last week?"
    is answered by what was said then, which may share no word and little meaning with it, and in a large store it
    is among neither of the other lists' best. The hybrid statement scores them on the others' range, so that adding
    them moves no other row's score. `limit` 0: no such list."""
    if not limit:
        return "dated AS (SELECT NULL::uuid AS id WHERE false)"
    return f"""
dated AS (
    SELECT t.id FROM {table} t WHERE {where} AND t.embedding IS NOT NULL
        -- the named times' whole range first, which an (agent_id, occurred_at) index can read
        AND t.occurred_at >= (SELECT min(start) FROM unnest(CAST(:named_from AS timestamptz[])) AS d(start))
        AND t.occurred_at < (SELECT max(stop) FROM unnest(CAST(:named_to AS timestamptz[])) AS d(stop))
        AND {_within_named_dates("t")}
    ORDER BY t.embedding <=> CAST(:embedding AS vector)
    LIMIT {limit}
)"""


def bonus(named_dates: bool, speaker: str | None) -> str:
    """What a row `t` gains after fusion and replies: DATE_SHARE if `named_dates` and it occurred within one of their
    spans, SPEAKER_SHARE if its speaker (`speaker`, an SQL expression over `t`) is one the query names."""
    terms = []
    if named_dates:
        terms.append(f"CASE WHEN {_within_named_dates('t')} THEN {bm25.float8(DATE_SHARE)} ELSE 0 END")
    if speaker:
        terms.append(f"CASE WHEN {speaker} = ANY(CAST(:speakers AS text[])) THEN {bm25.float8(SPEAKER_SHARE)} ELSE 0 END")
    return " + ".join(terms) or "0"
