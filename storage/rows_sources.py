"""Sources: one upsert per batch (unique per run by ref), linked to the nodes that used them. (Mixed into `storage.repository.Repository`.)"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

from sqlalchemy import case, func
from sqlalchemy.sql.expression import Executable
from sqlmodel import col, select

from storage.models import (
    Node,
    NodeSource,
    Source,
    loaded_row,
    stored_id,
    table_of,
    utcnow,
)
from storage.repository_base import (
    RepositoryBase,
    SourceInput,
    UpsertInsert,
    _chunks,
    united_text,
)


class SourceRows(RepositoryBase):
    def add_sources(
        self,
        run_id: str,
        inputs: Sequence[SourceInput],
        *,
        node_id: int | None = None,
        stored_refs: Collection[str] | None = None,
        stored_texts: Mapping[str, str] | None = None,
        bump: bool = True,
    ) -> list[Source]:
        """Store sources (one row per run and ref) and link them to `node_id` in the given order;
        one detached Source (with its id) per input, in input order, duplicates included.

        A stored ref keeps its row (title, url...) and its text becomes the new read followed by the
        earlier reads' lines it lacks (`united_text`). One SELECT of the stored texts, one `INSERT ...
        ON CONFLICT (run_id, ref) DO UPDATE ... RETURNING` for the batch (a text at least as long
        wins), one `INSERT ... ON
        CONFLICT DO NOTHING` of the links, the version bump (with the links on PostgreSQL), one
        COMMIT. Safe under concurrency: the database resolves a ref inserted by two workers at once
        (two reads of one page united at the same moment keep the longer union).

        `stored_refs`: the run's refs known to be stored (its executing graph keeps them); only
        those are read back, and a batch of new refs sends no SELECT. `stored_texts`: the stored
        text of each of those refs, known to the caller: none is read back. `bump=False`: the caller
        bumps the run's version itself (an executing run's journal, in its next batch)."""
        return self.add_source_batches(
            run_id, [inputs], node_id=node_id, stored_refs=stored_refs, stored_texts=stored_texts, bump=bump
        )[0]

    def add_source_batches(
        self,
        run_id: str,
        batches: Sequence[Sequence[SourceInput]],
        *,
        node_id: int | None = None,
        stored_refs: Collection[str] | None = None,
        stored_texts: Mapping[str, str] | None = None,
        bump: bool = True,
    ) -> list[list[Source]]:
        """`add_sources` of each batch in turn (several searches' results: each ranked within its
        own), in one transaction: what is stored, and the ids, are those of one add per batch. One
        upsert per batch, one INSERT of all the links, one COMMIT."""
        by_ref: dict[str, Source] = {}
        links: dict[int, tuple[int, float]] = {}  # source id -> (rank, score): the first link kept
        results: list[list[Source]] = []
        with self._session() as s:
            wanted_refs = {item.ref for batch in batches for item in batch}
            reread = list(wanted_refs) if stored_refs is None else [ref for ref in wanted_refs if ref in stored_refs]
            if stored_texts is not None:
                stored = {ref: stored_texts[ref] for ref in reread}
            else:
                stored = (
                    dict(
                        s.exec(
                            select(Source.ref, Source.text).where(Source.run_id == run_id, col(Source.ref).in_(reread))
                        ).all()
                    )
                    if reread
                    else {}
                )
            for inputs in batches:
                if not inputs:
                    results.append([])
                    continue
                # One entry per ref (a statement cannot touch a row twice): the first occurrence gives
                # the row and the rank; the longest text wins.
                wanted: dict[str, SourceInput] = {}
                rank: dict[str, int] = {}
                for position, item in enumerate(inputs):
                    known = wanted.get(item.ref)
                    if known is None:
                        wanted[item.ref], rank[item.ref] = item, position
                    else:
                        wanted[item.ref] = replace(known, text=united_text(known.text, item.text))
                now = utcnow()
                # In ref order: concurrent batches lock the rows they share in the same order (no deadlock).
                rows: list[dict[str, Any]] = [
                    dict(
                        run_id=run_id,
                        ref=ref,
                        kind=item.kind,
                        url=item.url,
                        title=item.title,
                        snippet=item.snippet,
                        text=item.text,
                        created_at=now,
                    )
                    for ref, item in sorted(wanted.items())
                ]
                for row in rows:
                    if row["ref"] in stored:
                        row["text"] = united_text(stored[row["ref"]], row["text"])
                for chunk in _chunks(rows):
                    # The rows as parameters of one statement (sent as one INSERT of many VALUES):
                    # compiled once per database, where VALUES built into it were compiled each time.
                    by_ref.update(
                        (row.ref, loaded_row(Source, row._mapping)) for row in s.execute(self._sources_upsert, chunk)
                    )
                stored.update((ref, by_ref[ref].text) for ref in wanted)  # the next batch unites with these
                for ref, item in wanted.items():
                    links.setdefault(stored_id(by_ref[ref]), (rank[ref], item.score))
                results.append([by_ref[item.ref] for item in inputs])
            if not by_ref:
                return results
            link_rows = sorted((sid, r, score) for sid, (r, score) in links.items())
            if node_id is not None and bump:
                self._insert_rows_with_bump(s, lambda chunk: self._link_rows(node_id, chunk), link_rows, run_id)
            elif node_id is not None:
                s.execute(self._links_insert, self._link_params(node_id, link_rows))
            elif bump:
                s.execute(self._bump(run_id))
            s.commit()
        return results

    @cached_property
    def _sources_upsert(self) -> Executable:
        """`INSERT INTO sources ... ON CONFLICT (run_id, ref) DO UPDATE SET text = <the longer> RETURNING *`,
        its rows given as parameters (`add_source_batches`): built once per repository."""
        table = table_of(Source)
        upsert = self._insert_on_conflict(table)
        # As long or longer: the united text (newest read first) may reorder as many characters.
        longer = func.length(upsert.excluded.text) >= func.length(table.c.text)
        return upsert.on_conflict_do_update(
            index_elements=[table.c.run_id, table.c.ref],
            set_={"text": case((longer, upsert.excluded.text), else_=table.c.text)},
        ).returning(*table.c)

    def _link_rows(self, node_id: int, links: Sequence[tuple[int, int, float]]) -> UpsertInsert:
        """`INSERT INTO node_sources ... ON CONFLICT DO NOTHING` of (source id, rank, score), its rows
        in the statement: what the version bump's CTE needs on PostgreSQL (`_insert_rows_with_bump`);
        `_links_insert` with `_link_params` otherwise."""
        return self._links_insert.values(self._link_params(node_id, links))

    @staticmethod
    def _link_params(node_id: int, links: Sequence[tuple[int, int, float]]) -> list[dict[str, Any]]:
        return [dict(node_id=node_id, source_id=sid, rank=r, score=score) for sid, r, score in links]

    def source_refs(self, run_id: str) -> set[str]:
        """The refs of the run's stored sources."""
        with self._session() as s:
            return set(s.exec(select(Source.ref).where(Source.run_id == run_id)).all())

    def link_sources(self, node_id: int, source_ids: Sequence[int]) -> None:
        """Link stored sources to a node, ranked by their position; existing links are kept.
        One `INSERT ... ON CONFLICT DO NOTHING`, one COMMIT."""
        first: dict[int, int] = {}
        for position, source_id in enumerate(source_ids):
            first.setdefault(source_id, position)
        if not first:
            return
        with self._session() as s:
            s.execute(self._links_insert, self._link_params(node_id, sorted((sid, r, 0.0) for sid, r in first.items())))
            s.commit()

    def list_sources(self, run_id: str) -> list[Source]:
        with self._session() as s:
            return list(s.exec(select(Source).where(Source.run_id == run_id).order_by(col(Source.id))).all())

    def sources_for_node(self, node_id: int) -> list[Source]:
        with self._session() as s:
            stmt = (
                select(Source)
                .join(NodeSource, col(NodeSource.source_id) == col(Source.id))
                .where(NodeSource.node_id == node_id)
                .order_by(col(NodeSource.rank), col(NodeSource.source_id))  # one order, on every database
            )
            return list(s.exec(stmt).all())

    def node_source_links(self, run_id: str) -> list[NodeSource]:
        with self._session() as s:
            stmt = select(NodeSource).join(Node, col(Node.id) == col(NodeSource.node_id)).where(Node.run_id == run_id)
            return list(s.exec(stmt).all())
