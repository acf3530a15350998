"""The local corpus index in the app: its first build (or the wait for another process building it)
as a progress bar, and what keeps it from being opened or written as one clear message."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import streamlit as st

from engine.safe_text import inline_text
from engine.search.local import LocalCorpusSearcher
from engine.search.protocol import SearchError
from engine.services import Services


@contextmanager
def corpus_progress() -> Iterator[Callable[[str, float], None]]:
    """A progress callback shown as a bar while the block runs (nothing is shown if it is never
    called: an index already built opens at once)."""
    bar = None

    def show(message: str, fraction: float) -> None:
        nonlocal bar
        text = inline_text(message)
        value = min(max(fraction, 0.0), 1.0)
        if bar is None:
            bar = st.progress(value, text=text)
        else:
            bar.progress(value, text=text)

    try:
        yield show
    finally:
        if bar is not None:
            bar.empty()


def corpus_error(exc: SearchError) -> None:
    st.error(inline_text(exc.user_message), icon=":material/lock:")


def search_description(services: Services, mode: str) -> str:
    """What a run of this search mode searches (`Searcher.description`), making the searcher on
    first use with its build shown; a corpus that cannot be opened now is said so, not raised."""
    try:
        with corpus_progress() as show:
            return services.searcher(mode, progress=show).description
    except SearchError as exc:
        corpus_error(exc)
        return "the local corpus, which cannot be opened now"


def local_corpus(services: Services) -> LocalCorpusSearcher | None:
    """The local corpus searcher, its build shown; None (the reason shown) when it cannot be opened."""
    try:
        with corpus_progress() as show:
            return services.corpus(progress=show)
    except SearchError as exc:
        corpus_error(exc)
        return None
