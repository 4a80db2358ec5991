"""Facts over time: a passage superseded by a newer one (never deleted: it stays readable as of the dates it held),
and the current passages a new one may replace, shown to the model so that it can decide."""

import uuid
from dataclasses import replace
from typing import Any

from app.errors import Conflict, NotFound
from app.llm.embeddings import EmbeddingError
from app.memory.archival.service import ArchivalMemory, NewPassage, Stored
from app.memory.models import ArchivalPassage
from app.memory.search.baseline import baseline, cohorts_embedded

# A stored passage is "possibly about the same thing" as a new one when the new text, embedded as a query, is this
# much closer to it than to generic text (the margin over the baseline of app/memory/search/baseline.py, as automatic
# recollection gates on): raw cosine cannot separate same-topic from other-topic pairs, and a passage embedding of the
# new text separates less. Chosen on newer facts against the older facts they replace (English, Japanese and across
# the two), weighing that a listing the model reads and may ignore costs little, a missed one a stale fact.
RELATED_MIN_MARGIN = 0.06
RELATED_MAX = 3


class AlreadySuperseded(Conflict):
    code = "already_superseded"


async def supersede(
    archival: ArchivalMemory,
    agent_id: uuid.UUID,
    passage_id: uuid.UUID,
    content: str,
    *,
    vectors: list[list[float]] | None = None,
    **changes: Any,
) -> Stored:
    """Store the fact that replaces a current passage and close the old one: valid until the new one's occurred_at,
    superseded by it. The new one is the old one as written (NewPassage.of it), `content` and `changes` (its other
    fields, by name) applied; its date and sources are its own (not given: now, and none; the old one keeps its
    own). A current passage with the same text (one the model has just stored, say) becomes the successor as it is
    (`duplicate`) instead of a second copy. A keyed passage's successor takes its key (and is never another passage:
    same_fact), and the old one keeps it, as the key's earlier version. The new passage is embedded before the old
    one is locked (`vectors`: embedded by the caller): no lock waits on the embedder."""
    if vectors is None:
        vectors = await archival.embedder.embed_passages([content])
    if (seen := await archival.passages.get(agent_id, passage_id)) is not None and seen.key is not None:
        await archival.passages.lock_keys(agent_id, [seen.key])  # before the row's lock, as PUT …/keys/{key} takes them
    old = await archival.passages.get(agent_id, passage_id, for_update=True)
    if old is None:
        raise NotFound(f"no archival passage {passage_id}")
    if old.superseded_by is not None:
        raise AlreadySuperseded(
            f"archival passage {passage_id} is already superseded by {old.superseded_by} "
            f"(from {old.valid_until:%Y-%m-%d %H:%M:%S %Z}); supersede that one instead"
        )
    # The key passes to the successor: the old passage lets go of it first (the unique index checks each row as it
    # is written), and takes it back as it is closed.
    key, old.key = old.key, None
    if key is not None:
        await archival.passages.save(old)
    new = replace(NewPassage.of(old, key=key, occurred_at=None, sources=()), content=content, **changes)
    [stored] = await archival.add(agent_id, [new], exclude=[old.id], vectors=vectors)
    old.key, old.valid_until, old.superseded_by = key, stored.passage.occurred_at, stored.passage.id
    await archival.passages.save(old)
    return stored


async def related(archival: ArchivalMemory, agent_id: uuid.UUID, passage: ArchivalPassage) -> list[ArchivalPassage]:
    """The current passages most likely about the same thing as `passage` (closest first, at most RELATED_MAX); none
    when the embedder fails here or the baseline's cohorts could not be embedded beforehand (the passage is stored
    all the same, and the caller's transaction does not wait on the embedder for them)."""
    if not cohorts_embedded(archival.embedder):
        return []
    try:
        vector = await archival.embedder.embed_query(passage.content)
    except EmbeddingError:
        return []
    base = await baseline(archival.embedder, vector)
    near = await archival.passages.closest(agent_id, vector, k=RELATED_MAX, exclude=[passage.id])
    return [p for p, similarity in near if base.margin(similarity) >= RELATED_MIN_MARGIN]
