"""Hybrid retrieval in one SQL statement, shared by every searchable kind (app/memory/kinds.py).

Candidates: the top rows by cosine distance (an exact scan of the agent's rows, its own HNSW index for the largest
agents: agent_indexes.py) and the top rows by BM25 over the lexical tokens (found through the GIN index; term
frequencies read from each row's term counts, migration 0013; document frequencies, counts and lengths from the
statistics triggers keep on write, migrations 0005, 0017). Fusion: a convex combination, 0.4 / 0.6, of the cosine
centred on the query's neighbourhood (taken to the query less CENTRE_SHARE of the vector candidates' mean,
`_centred`) and min-max normalised over the candidates, and BM25 as a share of the query's bound — the sum of its
terms' IDF x (k1 + 1), what a row holding every term would approach. Over the bound, not over the best match: a query
whose only lexical evidence is weak (a particle such as "です", a common word) would hand that match a full lexical
score, and it would outrank the memory that answers in other words. Not ts_rank, which has no inverse document
frequency; not reciprocal-rank fusion, which keeps only ranks and fuses a clear lexical winner and a tie alike.
Then replies: a short line that follows a short question among the best candidates gains part of the question's
score (`_replies`), since in a conversation the answer ("Yes, last summer") often shares no word and little meaning
with what is asked, and its question does. Last, the rows a query names gain a share: from a date it names, said by
a speaker it names (app/memory/search/named_sql.py, which also adds the rows of a named time as candidates of their
own). The reported `similarity` is the plain cosine to the query (recollection gates on it). Every parameter was
chosen on LongMemEval, LoCoMo and the Japanese set at once (bench/README.md; how, and what was tried: ARCHIVE.md)."""

import functools
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sqlalchemy import Float, Uuid, column, select, text
from sqlalchemy.orm import defer
from sqlmodel.ext.asyncio.session import AsyncSession

from app.memory.search import bm25, named_sql
from app.memory.search.agent_indexes import OWN_INDEXES
from app.memory.search.query import Mode, SearchQuery
from app.metrics import SEARCH_SECONDS
from app.models_base import orm_attribute, table_of

CANDIDATES_PER_LIST = 100
# Weight of the normalised cosine similarity; the rest goes to normalised BM25.
VECTOR_WEIGHT = {"hybrid": 0.4, "vector": 1.0, "text": 0.0}
# The hybrid's cosine is taken to the query less this share of its vector candidates' mean (`_centred`); the
# vector mode ranks by the plain cosine.
CENTRE_SHARE = {"hybrid": 0.6, "vector": 0.0, "text": 0.0}
# A short reply to one of the REPLY_LEAD best-scoring short questions gains this share of the question's score.
REPLY_SHARE = 0.3
REPLY_LEAD = 30
# The reply is looked for among this many rows after the question (a tool result may come between).
REPLY_WINDOW = 3
REPLY_MAX_TOKENS = 50  # lexical tokens, of the question and of the reply: longer lines stand on their own
QUESTION_PATTERN = r"[?？]\s*$"


class SearchedRow(Protocol):
    """What the search asks of a table model (a searchable kind's, app/memory/kinds.py): an id, and the vector
    column it ranks by, left unloaded on the rows it returns."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def embedding(self) -> object: ...


Row = TypeVar("Row", bound=SearchedRow)


@dataclass
class Hit:
    id: uuid.UUID
    score: float
    similarity: float
    answers: uuid.UUID | None = None  # a reply's: the question it took part of its score from (`_replies`)


def _nearest(table: str, where: str, limit: int, own_index: uuid.UUID | None) -> str:
    """The top `limit` rows by cosine distance to the query: through the agent's own HNSW index if it has one
    (agent_indexes.py; `own_index`: its id, whose predicate, written out, is what lets the planner take the index),
    otherwise by an exact scan of the agent's rows (through its agent_id index; one distance per row)."""
    own = f" AND agent_id = '{own_index}'::uuid" if own_index else ""
    return f"""
vec AS (
    SELECT id, embedding FROM {table} WHERE {where}{own} AND embedding IS NOT NULL
    ORDER BY embedding <=> CAST(:embedding AS vector)
    LIMIT {limit}
), centre AS (
    -- the sum, divided out in `_centred`: pgvector's avg() builds a new float8 array for every row it adds (0.3 ms
    -- for 100 candidates); the float4 sum moves the centred cosines by under 1e-6 (no ranking changed on the
    -- benches' sets)
    SELECT sum(embedding) AS total, count(*)::float8 AS n FROM vec  -- NULL without candidates: no centring
)"""


def _cosine(row: str) -> str:
    """The cosine of `row` (an alias) to the query; NULL for a row not embedded (yet)."""
    return f"1 - ({row}.embedding <=> CAST(:embedding AS vector))"


def _centred(similarity: str, row: str, centre_share: float) -> str:
    """`similarity` (the row's cosine, an SQL expression) less `centre_share` of the row's dot product with the mean
    of the query's vector candidates (what the rows nearest the query share: the agent's topic, a speaker's manner).
    multilingual-e5 puts every text at a cosine of 0.75-0.85 to every other; within a query's neighbourhood what
    the candidates have in common says nothing about which of them answers, and small talk in the agent's usual
    register ("Wow, that painting is awesome!") rides on it. Centring is the classic cure for such hubs (Suzuki et
    al., "Centering similarity measures to reduce hubs", EMNLP 2013), here on the query's own neighbourhood: no
    statistic is kept on write, and an agent's other topics do not pull it (the store-wide mean does worse on
    LoCoMo)."""
    if not centre_share:
        return similarity
    # <#> is the negative inner product; coalesce: no candidates, no centring
    mean_product = f"({row}.embedding <#> (SELECT total FROM centre)) / (SELECT n FROM centre)"
    return f"{similarity} + {bm25.float8(centre_share)} * coalesce({mean_product}, 0)"


def _fused(table: str, vector_weight: float, centre_share: float, bonus: str) -> str:
    """Both candidate lists with their cosine and BM25, and the fused score: the centred cosine (`_centred`)
    min-max normalised over the candidates, BM25 as a share of the query's bound (see `bound`). `bonus`: what a row
    `t` gains at the end (see `named_sql.bonus`)."""
    return f"""
pool AS (
    SELECT t.id, c.similarity, {_centred("c.similarity", "t", centre_share)} AS centred,
           coalesce(b.score, 0) AS bm25, b.added,
           {bonus} AS bonus
    FROM (
        -- each candidate with its BM25 (if any), by grouping rather than joining: the planner, guessing a row or
        -- two per CTE, joined the lists in a nested loop (100 x 350 comparisons on LoCoMo); `added`: from the named
        -- time's list alone
        SELECT id, max(score) AS score, bool_and(dated) AS added FROM (
            SELECT id, NULL::float8 AS score, true AS nearest, false AS dated FROM vec
            UNION ALL SELECT id, score, false, false FROM bm25
            UNION ALL SELECT id, NULL::float8, true, true FROM dated
        ) listed GROUP BY id HAVING bool_or(nearest) OR id IN (SELECT id FROM lex)
    ) b JOIN {table} t ON t.agent_id = :agent_id AND t.id = b.id
    CROSS JOIN LATERAL (SELECT {_cosine("t")} AS similarity) c
), norms AS (
    -- over the vector and lexical candidates: rows added from a named time do not move the others' scores
    SELECT min(centred) AS low, max(centred) AS high,
           nullif((SELECT value FROM bound), 0) AS lexical_scale
    FROM pool WHERE NOT added
), fused AS (
    SELECT id, coalesce(similarity, 0) AS similarity,
           -- a row without a vector gets no vector share, and does not stretch the others' range
           {vector_weight} * CASE WHEN centred IS NULL THEN 0
               ELSE coalesce(least(greatest((centred - low) / nullif(high - low, 0), 0), 1), 1) END
           + {1 - vector_weight} * coalesce(bm25 / lexical_scale, 0) AS score,
           bonus
    FROM pool CROSS JOIN norms
)"""


def _replies(table: str, where: str, sequence: tuple[str, ...], vector_weight: float, centre_share: float, bonus: str) -> str:
    """A short row that follows a short question among the top REPLY_LEAD candidates (a reply: the first row the
    search admits among the agent's REPLY_WINDOW next in `sequence` order; both at most REPLY_MAX_TOKENS) gains
    REPLY_SHARE x the question's score, up to 1: "Yes, last summer" means nothing without the question before it.
    Long lines stand on their own: an assistant's long answer that ends with "How does that sound?" is not a
    question the next line answers. A reply outside the candidates joins them, its own score computed as theirs
    were; each reply names its question (`question_id`, the best-scoring one if several), which recollection shows
    with it."""
    ordered = ", ".join(sequence)
    lead = ", ".join(f"q.{c} AS q_{c}" for c in sequence)
    after = ", ".join(f"l.q_{c}" for c in sequence)
    return f"""
lead AS (
    SELECT l.score, q.id AS question_id, {lead}
    FROM (SELECT id, score FROM fused ORDER BY score DESC, id LIMIT {REPLY_LEAD}) l JOIN {table} q ON q.agent_id = :agent_id AND q.id = l.id
    WHERE q.token_count <= {REPLY_MAX_TOKENS} AND q.content ~ '{QUESTION_PATTERN}'
), replies AS (
    SELECT r.id, max(l.score) AS question_score, (array_agg(l.question_id ORDER BY l.score DESC, l.question_id))[1] AS question_id
    FROM lead l CROSS JOIN LATERAL (
        -- the window is read through the (agent_id, order) index; filtered inside, the planner misjudges how
        -- many rows the filter keeps and sorts every later row of the agent instead (15 ms at 5,000 messages)
        SELECT id, token_count FROM (
            SELECT * FROM {table} WHERE agent_id = :agent_id AND ({ordered}) > ({after}) ORDER BY {ordered} LIMIT {REPLY_WINDOW}
        ) following
        WHERE {where} ORDER BY {ordered} LIMIT 1
    ) r
    WHERE r.token_count <= {REPLY_MAX_TOKENS}
    GROUP BY r.id
), ranked AS (
    SELECT id, similarity, score, bonus, NULL::uuid AS question_id FROM fused WHERE id NOT IN (SELECT id FROM replies)
    UNION ALL
    SELECT r.id, coalesce(c.similarity, 0),
           least(own.score + {REPLY_SHARE} * r.question_score, 1),
           {bonus}, r.question_id
    FROM replies r JOIN {table} t ON t.agent_id = :agent_id AND t.id = r.id LEFT JOIN fused f ON f.id = r.id LEFT JOIN bm25 b ON b.id = r.id
    CROSS JOIN norms
    CROSS JOIN LATERAL (SELECT {_cosine("t")} AS similarity) c
    CROSS JOIN LATERAL (SELECT coalesce(f.score,
        {vector_weight} * coalesce(least(greatest(({_centred("c.similarity", "t", centre_share)} - low) / nullif(high - low, 0), 0), 1), 0)
        + {1 - vector_weight} * coalesce(b.score / lexical_scale, 0)) AS score) own
)"""


@functools.lru_cache(maxsize=1024)  # a few shapes per table (mode, filters), and one per agent with its own index
def _sql(
    table: str,
    columns: str,
    filters: str,
    mode: Mode,
    sequence: tuple[str, ...] | None,
    own_index: uuid.UUID | None,
    bonus: str,
    dated: bool,
) -> str:
    where = f"agent_id = :agent_id AND ({filters})"
    vec_limit = CANDIDATES_PER_LIST if mode != "text" else 0
    lex_limit = CANDIDATES_PER_LIST if mode != "vector" else 0
    ctes = [
        bm25.statistics(table),
        _nearest(table, where, vec_limit, own_index),
        named_sql.dated(table, where, CANDIDATES_PER_LIST if dated else 0),
        bm25.lexical(table, filters, lex_limit),
        _fused(table, VECTOR_WEIGHT[mode], CENTRE_SHARE[mode], bonus),
    ]
    ranked, question = "fused", "NULL::uuid"
    if mode == "hybrid" and sequence:
        ctes.append(_replies(table, where, sequence, VECTOR_WEIGHT[mode], CENTRE_SHARE[mode], bonus))
        ranked, question = "ranked", "question_id"
    return f"""
WITH {", ".join(ctes)}, top AS (
    SELECT id, similarity, score + bonus AS score, {question} AS question_id FROM {ranked}
    ORDER BY score + bonus DESC, similarity DESC, id LIMIT :k
)
SELECT {columns}, top.similarity, top.score, top.question_id FROM top JOIN {table} t ON t.agent_id = :agent_id AND t.id = top.id
ORDER BY top.score DESC, top.similarity DESC, top.id
"""


def search_statement(
    model: type[Row],
    agent_id: uuid.UUID,
    query: SearchQuery,
    embedding: list[float],
    *,
    where: list[str] | None = None,
    params: dict[str, Any] | None = None,
    sequence: tuple[str, ...] | None = None,
    speaker: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """The search as one SQL statement and its parameters (the benchmarks EXPLAIN ANALYZE it). `embedding`: the
    query's vector; the rest is the table's: `where`, extra trusted SQL conditions over it, their values bound
    through `params`; `sequence`: the columns that order the agent's rows as they were written (a reply follows its
    question), None: no such order; `speaker`: an SQL expression over the row `t` for who said it (lower case), None:
    rows have no speaker. Rows from the dates the query names, and rows said by those it names, gain a share
    (named_sql.bonus)."""
    where = list(where or [])
    params = {
        **(params or {}),
        "agent_id": agent_id,
        "embedding": vector_literal(embedding),
        "k": query.k,
        "terms": list(dict.fromkeys(query.terms)),  # a repeated term would count twice in `bound` alone
    }
    if query.after:
        where.append("created_at > :after")
        params["after"] = query.after
    if query.before:
        where.append("created_at < :before")
        params["before"] = query.before
    table = table_of(model)
    own_index = agent_id if OWN_INDEXES.has(table.name, agent_id) else None
    hybrid = query.mode == "hybrid"  # the other modes rank each row on its own signal alone
    dates = query.dates if hybrid else []
    speakers = query.speakers if hybrid and speaker else []
    if dates:
        params["named_from"] = [start for start, _ in dates]
        params["named_to"] = [stop for _, stop in dates]
    if speakers:
        params["speakers"] = speakers
    bonus = named_sql.bonus(bool(dates), speaker if speakers else None)
    filters = " AND ".join(where) or "TRUE"
    return _sql(table.name, _columns(model), filters, query.mode, sequence, own_index, bonus, bool(dates)), params


def vector_literal(vector: list[float]) -> str:
    """pgvector's text form of a vector, 9 significant digits (what a float4 needs to come back the same): twice as
    fast as `str()` of the list, whose 17 digits of a float8 pgvector rounds away anyway."""
    return "[" + ",".join([f"{x:.9g}" for x in vector]) + "]"


@functools.cache
def _columns(model: type[Row]) -> str:
    """Every column but the vector (see NO_PASSAGE_VECTOR in app/memory/archival/repository.py): it stays unloaded on the returned rows."""
    return ", ".join(f"t.{c.name}" for c in table_of(model).columns if c.name != "embedding")


@functools.lru_cache(maxsize=1024)
def _query(model: type[Row], sql: str) -> Any:
    """The ORM statement around the SQL, built once per text (SQLAlchemy parses a text's parameters on each build)."""
    return (
        select(model, column("similarity", Float), column("score", Float), column("question_id", Uuid))
        .options(defer(orm_attribute(model.embedding), raiseload=True))
        .from_statement(text(sql))
    )


async def hybrid_search(
    session: AsyncSession, model: type[Row], agent_id: uuid.UUID, query: SearchQuery, embedding: list[float], **table: Any
) -> list[tuple[Row, Hit]]:
    """The ranked rows of `model` for one agent; `table`: the keyword arguments of `search_statement`."""
    sql, params = search_statement(model, agent_id, query, embedding, **table)
    started = time.perf_counter()
    # One round trip: the ranked rows come back whole, with their scores.
    found = (await session.execute(_query(model, sql), params)).all()
    SEARCH_SECONDS.labels(table_of(model).name).observe(time.perf_counter() - started)
    return [(row, Hit(row.id, score, similarity, question)) for row, similarity, score, question in found]
