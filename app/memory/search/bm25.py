"""The lexical side of the hybrid statement (app/memory/search/hybrid.py): BM25 over the rows' lexical tokens. The
candidate rows are found through the full-text index, the rarest query terms first; their term frequencies come from
each row's term counts (migration 0013), document frequencies, counts and lengths from the statistics the triggers
keep on write (migrations 0005, 0017). Why BM25 rather than PostgreSQL's ts_rank, and why over the query's bound: the
hybrid statement's docstring."""

from app.memory.models import AGENT_TSV_EXPRESSION

BM25_K1 = 1.2
BM25_B = 0.75
# Rows scored by BM25 at most (those with the best ts_rank): bounds the work for a term that matches everything.
MAX_LEXICAL_MATCHES = 2000
# Candidate rows are found through the rarest query terms whose rows add up to about this many (see `probe`).
PROBE_ROWS = 1000


def statistics(table: str) -> str:
    """The agent's document count and mean length, kept on write (migrations 0005, 0017): no scan of its rows."""
    return f"""
stats AS (
    SELECT coalesce(max(docs), 0) AS n, greatest(coalesce(max(tokens)::float8 / nullif(max(docs), 0), 1), 1) AS avgdl
    FROM lexical_corpus WHERE agent_id = :agent_id AND source = '{table}'
)"""


def lexical(table: str, filters: str, limit: int) -> str:
    """BM25 of the candidate rows (those holding one of the query's rarer terms, see `probe`), scored on every
    query term, and the top `limit` of them. The candidates come from the full-text index, asked for the terms AND
    the agent (AGENT_TSV_EXPRESSION): GIN intersects the posting lists, so only the agent's own rows are read, in a
    table of one agent or of thousands, and never more of them than the probe's terms hold. `filters`: the row
    conditions beyond the agent (SQL, "TRUE" for none); the agent's own `agent_id = …` stays out, or the planner
    intersects GIN's rows with every row of the agent from its btree (10 ms of a 100,000-passage agent's search). So
    the statement reads each partition's part of the index (migration 0015): where the agent has no rows, its term
    is missing and the part answers at once (on Citus, which routes by agent_id, this side would name the agent)."""
    return f"""
df AS (
    -- float8 throughout: numeric arithmetic (what the literals would make it) costs microseconds a row
    SELECT term, df, {idf("(SELECT n FROM stats)", "df")} AS idf FROM lexical_terms
    WHERE agent_id = :agent_id AND source = '{table}' AND term = ANY(CAST(:terms AS text[]))
), probe AS (
    -- The terms that find the candidates: the rarest first, while the rows of those before stay under
    -- {PROBE_ROWS:,} (so the rarest always, and every term while the agent is small). A row holding only common
    -- terms carries little BM25, and as the agent grows such rows would be most of the work: this bounds it, whatever
    -- the history. The candidates are scored on every query term.
    -- (an empty q would leave the agent alone in the AND, matching all its rows)
    SELECT q, CASE WHEN numnode(q) > 0 THEN q && quote_literal('agent ' || CAST(:agent_id AS uuid))::tsquery END AS in_agent
    FROM (
        SELECT to_tsquery('simple', string_agg(quote_literal(term), ' | ')) AS q
        FROM (SELECT term, sum(df) OVER (ORDER BY df, term) - df AS rarer_rows FROM df) AS t
        WHERE rarer_rows < {PROBE_ROWS}
    ) AS terms
), matches AS (
    -- '{{}}' || detoasts the term counts once here: long rows keep them compressed, and each query term's `->>`
    -- below would decompress them again (a fifth of a LongMemEval search)
    SELECT id, '{{}}'::jsonb || term_counts AS term_counts, token_count FROM {table}, probe
    WHERE ({filters}) AND {AGENT_TSV_EXPRESSION} @@ probe.in_agent
    ORDER BY ts_rank(tsv, probe.q) DESC
    LIMIT {MAX_LEXICAL_MATCHES if limit else 0}
), bm25 AS (
    -- Each match scored on its own over the query's terms (the few rows of `df`), its term frequencies read from
    -- its term counts (migration 0013; counted in its text, they were 40 % of the statement). Joined to every term
    -- and grouped back, as before, the matches took a sort and a grouping of their own, and the sum's order (its
    -- last bits) followed the join's plan; here it is the order of `df`'s rows.
    SELECT m.id, s.score
    FROM matches m CROSS JOIN stats CROSS JOIN LATERAL (
        SELECT sum(
            df.idf * c.tf * {float8(BM25_K1 + 1)}
            / (c.tf + {float8(BM25_K1)} * ({float8(1 - BM25_B)} + {float8(BM25_B)} * m.token_count / stats.avgdl))
        ) AS score
        FROM df CROSS JOIN LATERAL (SELECT (m.term_counts ->> df.term)::float8 AS tf) c
        WHERE c.tf IS NOT NULL
    ) s
    WHERE s.score IS NOT NULL  -- a match whose counts hold none of the terms (its lexemes and tokens disagree)
), bound AS (
    -- What a row matching every query term would approach: the sum of the terms' IDF x (k1 + 1). A term no
    -- row contains has the highest IDF: a query whose content the memory lacks has weak lexical evidence.
    SELECT sum(coalesce(df.idf, {idf("stats.n", "0")})) * {float8(BM25_K1 + 1)} AS value
    FROM unnest(CAST(:terms AS text[])) AS q(term) LEFT JOIN df USING (term) CROSS JOIN stats
), lex AS (
    SELECT id FROM bm25 ORDER BY score DESC, id LIMIT {limit}
)"""


def idf(docs: str, df: str) -> str:
    """BM25's inverse document frequency of a term in `df` of `docs` documents (SQL expressions), as float8."""
    return f"ln(1 + ({docs} - {df} + 0.5) / ({df} + 0.5))::float8"


def float8(value: float) -> str:
    """A float8 literal: a bare 2.2 is numeric in PostgreSQL, and makes the arithmetic around it numeric."""
    return f"{value!r}::float8"
