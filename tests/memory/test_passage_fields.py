"""A passage's written fields are defined once (NewPassage, the row's columns of the same names) and every write path
carries them whole: a field the API takes that NewPassage does not know would be dropped on the way, so none is."""

from dataclasses import fields

import pytest

from app.memory.archival.keys import unchanged
from app.memory.archival.service import NewPassage
from app.memory.models import ArchivalPassage
from app.memory.schemas import PassageCreate, PassageSupersede, PassageWrite

WRITTEN = {f.name for f in fields(NewPassage)}


@pytest.mark.parametrize("body", [PassageWrite, PassageCreate, PassageSupersede])
def test_every_field_a_write_takes_is_a_written_field_and_a_column(body: type[PassageWrite]) -> None:
    assert set(body.model_fields) <= WRITTEN
    assert WRITTEN <= set(ArchivalPassage.model_fields)


def test_a_create_takes_every_written_field() -> None:
    assert set(PassageCreate.model_fields) == WRITTEN


def test_a_passage_is_made_of_a_body_or_a_row_by_its_fields() -> None:
    body = PassageCreate.model_validate({"content": "the cat is Mochi", "tags": ["Pets"], "key": "cat"})
    new = NewPassage.of(body)
    assert (new.content, list(new.tags), new.key) == ("the cat is Mochi", ["Pets"], "cat")
    row = ArchivalPassage(content="the cat is Mochi", tags=["pets"], sources=[], key="cat", embedding=[], embedding_model="m")
    assert NewPassage.of(row, content="the cat is Tama").content == "the cat is Tama"
    assert unchanged(row, new)  # tags as stored: normalised
    assert not unchanged(row, NewPassage.of(body, tags=["dogs"]))
