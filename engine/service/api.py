"""Thoughtmap's Python API: start a run, wait for it or stream its events, steer it, get its report.
The HTTP API (`engine/service/http.py`) and the MCP server (`engine/service/mcp_server.py`) are thin
layers over this class, and `thoughtmap run`'s checks are the ones here.

    from engine.service import Thoughtmap

    with Thoughtmap(llm="fake") as tm:
        run = tm.start("What caused the decline of the Roman Empire?", method="deot",
                       params={"max_nodes": 5})
        for event in tm.events(run.id):          # until the run ends
            print(event.kind, event.data.get("label") or event.data.get("text", ""))
        print(tm.report(run.id))                 # Markdown with numbered, resolving sources

Bad input raises `BadRequest` (unknown method, bad parameters, an empty or too long question, a
command that does not apply), an unknown run `NotFound`, a run in a state that refuses the action
`Conflict`; each message says what was wrong and what to do, and nothing is stored half-way.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from engine.access import LimitReached, Viewer
from engine.config import LLMChoice, SearchMode, Settings, load_settings
from engine.methods.registry import DEFAULT_METHOD
from engine.service.feed import FeedEvent, RunFeed, edge_data, node_data, status_data

if TYPE_CHECKING:
    from engine.reads import Command, Run
    from engine.services import Services

REPORT_FORMATS = ("md", "json", "pdf", "docx")
SEARCH_MODES: tuple[str, ...] = ("local", "web", "both", "none")
LLM_CHOICES: tuple[str, ...] = ("auto", "local", "openai", "fake")
PROFILES = ("auto", "quick", "paper")
MAX_SEARCH_QUERY_CHARS = 1_000
MAX_SEARCH_K = 50


class ApiError(Exception):
    """A request that cannot be served as asked; `status` is its HTTP status."""

    status = 400


class BadRequest(ApiError):
    status = 422


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class Forbidden(ApiError):
    """Someone else's run: not shared with this person, or shared read-only and this would change it."""

    status = 403


@dataclass(frozen=True)
class MethodInfo:
    name: str
    title: str
    summary: str
    good_for: str
    params: list[dict[str, Any]]
    params_schema: dict[str, Any]
    commands: list[dict[str, Any]]


def run_view(run: Run, progress: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A run as the APIs show it (never a key: `llm_info` holds none)."""
    view = {
        "id": run.id,
        "question": run.question,
        "title": run.title,
        "method": run.method,
        "params": run.params,
        "llm": run.llm_info.get("description", ""),
        "search": run.search_mode,
        "max_tokens": run.max_tokens,
        "max_cost": run.max_cost,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        **status_data(run),
    }
    if progress is not None:
        view["progress"] = dict(progress)
    return view


def _positive(name: str, value: float | None, *, whole: bool) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
        or (whole and not float(value).is_integer())
    ):
        kind = "positive whole number" if whole else "positive, finite number"
        raise BadRequest(f"{name} must be a {kind} (got {value!r}); leave it out for no budget")


# Whom a server's own object serves before a request says whose it is: nobody can read or change anything.
NOBODY = Viewer(user_id=-1, name="nobody", signed_in=True)


class Thoughtmap:
    """One process's door to the engine. `llm`: what runs use unless a run asks otherwise (auto,
    local, openai, fake; None: THOUGHTMAP_LLM, else auto). `services`: built from `settings` (or
    the environment) unless given."""

    def __init__(
        self,
        *,
        llm: str | None = None,
        settings: Settings | None = None,
        services: Services | None = None,
        feed_poll_s: float | None = None,
        user: str | None = None,
        anonymous: bool = False,
    ) -> None:
        if services is None:
            from engine.services import build_services  # the database and the methods: loaded here

            services = build_services(settings or load_settings())
        self.services = services
        self.default_llm = self._check_llm(llm or services.settings.llm_choice)
        self._prepared: set[str] = set()
        self.feed = RunFeed(services.reads) if feed_poll_s is None else RunFeed(services.reads, poll_s=feed_poll_s)
        # Whom this object serves: in multi-user mode, the person `user` names (email or id); with
        # `anonymous` (a server whose requests each say whose they are: `as_viewer`), nobody.
        self.viewer = NOBODY if anonymous and services.settings.team.sign_in else self._viewer_named(user)
        services.runner.recover_interrupted()

    def _viewer_named(self, user: str | None) -> Viewer:
        from storage.users import UserNotFound

        access = self.services.access
        if not self.services.settings.team.sign_in:
            if user is not None:
                raise BadRequest("sign-in is off (single-user mode): leave out the user; every run is yours")
            return access.local_viewer()
        if user is None:
            raise BadRequest(
                "sign-in is on: say whom this serves (user='their email'); each person sees their own runs"
            )
        try:
            found = access.users.find_user(user)
        except UserNotFound as exc:
            raise BadRequest(str(exc)) from exc
        if found.is_local or not self.services.settings.team.allows(found.email):
            raise BadRequest(f"'{user}' may not sign in (THOUGHTMAP_ADMINS, THOUGHTMAP_ALLOWED_EMAILS)")
        assert found.id is not None
        return access.viewer_for(found.id)

    def as_viewer(self, viewer: Viewer) -> Thoughtmap:
        """The same door serving another person (the HTTP API and MCP server make one per request):
        it shares this object's services and feed, and is not to be closed."""
        view = copy.copy(self)
        view.viewer = viewer
        return view

    def __enter__(self) -> Thoughtmap:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self, *, grace_s: float = 30.0) -> None:
        """Stop: the runs executing in this process are interrupted at their next step (resumable,
        finished nodes kept; `resume` continues them), given `grace_s` to record it, then the
        services close."""
        runner = self.services.runner
        for run_id in runner.interrupt_all("the process serving it stopped; resume the run to continue"):
            runner.wait(run_id, timeout=grace_s)
        self.services.close()

    # ------------------------------------------------------------------ methods and corpus

    def methods(self) -> list[MethodInfo]:
        """Every method this process serves, with its parameters (name, type, default, help), their
        JSON schema and its steering commands."""
        infos = []
        for name, cls in sorted(self.services.methods.items()):
            commands = [
                {
                    "name": spec.name,
                    "label": spec.label,
                    "help": spec.help,
                    "targets_node": spec.targets_node,
                    "node_kinds": sorted(spec.kinds),
                    "payload_schema": spec.payload.model_json_schema(),
                }
                for spec in cls.contract().commands.values()
                if spec.listed
            ]
            params = [
                {**row, "default": row["default"] if _jsonable(row["default"]) else str(row["default"])}
                for row in cls.describe_params()
            ]
            infos.append(
                MethodInfo(
                    name=name,
                    title=cls.title,
                    summary=cls.summary,
                    good_for=cls.good_for,
                    params=params,
                    params_schema=cls.Params.model_json_schema(),
                    commands=commands,
                )
            )
        return infos

    def search(self, query: str, k: int = 10) -> list[dict[str, Any]]:
        """The bundled corpus (and ingested files) searched as the methods search it."""
        query = (query or "").strip()
        if not query:
            raise BadRequest("the search query is empty; give the words to search for")
        if len(query) > MAX_SEARCH_QUERY_CHARS:
            raise BadRequest(f"the search query is {len(query)} characters; at most {MAX_SEARCH_QUERY_CHARS}")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SEARCH_K:
            raise BadRequest(f"k must be a whole number from 1 to {MAX_SEARCH_K} (got {k!r})")
        from engine.search.exclusion import OwnUploadsOnly
        from engine.search.protocol import SearchError

        searcher = self.services.searcher("local")
        if self.viewer.signed_in:  # a person's uploads are theirs (NOBODY sees none)
            searcher = OwnUploadsOnly(searcher, self.viewer.user_id)
        try:
            hits = searcher.search(query, k=k)
        except SearchError as exc:
            raise Conflict(exc.user_message) from exc
        return [
            {"title": h.title, "ref": h.ref, "url": h.url, "snippet": h.snippet, "score": h.score, "kind": h.kind}
            for h in hits
        ]

    # ------------------------------------------------------------------ runs

    def start(
        self,
        question: str,
        method: str = DEFAULT_METHOD,
        params: Mapping[str, Any] | None = None,
        *,
        llm: str | None = None,
        search: str | None = None,
        profile: str = "auto",
        max_tokens: int | None = None,
        max_cost: float | None = None,
    ) -> Run:
        """Create a run and start it (in this process, or on a worker with THOUGHTMAP_EXECUTION=queue).
        Everything is checked before anything is stored."""
        from engine.methods.params import ParamError, build_params_with_profile, profile_for_llm
        from engine.methods.registry import UnknownMethod, get_method
        from engine.questions import QuestionError, clean_question

        try:
            question = clean_question(question)
        except QuestionError as exc:
            raise BadRequest(str(exc)) from exc
        try:
            method_cls = get_method(method, self.services.methods)
        except UnknownMethod as exc:
            raise BadRequest(str(exc)) from exc
        if params is not None and not isinstance(params, Mapping):
            raise BadRequest(f"params must be an object of parameter names and values (got {type(params).__name__})")
        if profile not in PROFILES:
            raise BadRequest(f"unknown profile '{profile}'; choose one of: {', '.join(PROFILES)}")
        search_mode = search or self.services.settings.search
        if search_mode not in SEARCH_MODES:
            raise BadRequest(f"unknown search '{search_mode}'; choose one of: {', '.join(SEARCH_MODES)}")
        _positive("max_tokens", max_tokens, whole=True)
        _positive("max_cost", max_cost, whole=False)
        kind = self._resolve(self._check_llm(llm) if llm is not None else self.default_llm)
        try:
            built = build_params_with_profile(
                method_cls.Params,
                dict(params or {}),
                method=method,
                profile=profile_for_llm(kind) if profile == "auto" else profile,
            )
        except ParamError as exc:
            raise BadRequest(str(exc)) from exc
        try:
            max_cost = self.services.access.budget_for_new_run(self.viewer, max_cost)
        except LimitReached as exc:
            raise Conflict(str(exc)) from exc
        self.prepare(kind)
        services = self.services
        run = services.runner.create_run(
            question=question,
            method=method,
            params=built,
            llm_info=services.llm_info(kind),
            search_mode=cast(SearchMode, search_mode),
            max_tokens=int(max_tokens) if max_tokens is not None else None,
            max_cost=max_cost,
            user_id=self.viewer.user_id,
        )
        try:
            services.access.admit_new_runs(self.viewer.user_id, [run.id])
        except LimitReached as exc:
            raise Conflict(str(exc)) from exc
        try:
            services.runner.start(run.id)
        except BaseException:
            # Not started (the queue could not take it, the claim was refused): a stored run that
            # nothing will execute must not stay behind, waiting for ever.
            with contextlib.suppress(Exception):
                services.repo.delete_run(run.id)
            raise
        return services.reads.get_run(run.id)

    def get(self, run_id: str) -> Run:
        """The run, when this person may read it (Forbidden otherwise)."""
        from engine.access import AccessDenied
        from engine.reads import RunNotFound

        try:
            run = self.services.reads.get_run(run_id)
        except RunNotFound as exc:
            raise NotFound(f"no run with id '{run_id}'; list the runs to find its id") from exc
        try:
            self.services.access.check_read(self.viewer, run)
        except AccessDenied as exc:
            raise Forbidden(str(exc)) from exc
        return run

    def _changeable(self, run_id: str) -> Run:
        """The run, when this person may change it: only its owner may."""
        from engine.access import AccessDenied

        run = self.get(run_id)
        try:
            self.services.access.check_change(self.viewer, run)
        except AccessDenied as exc:
            raise Forbidden(str(exc)) from exc
        return run

    def share(self, run_id: str, with_user: str | None = None) -> list[str]:
        """Share the run read-only with a person (their email; they must have signed in once) or, with
        None, with everyone signed in. Returns whom it is shared with now ("everyone", emails)."""
        return self._set_share(run_id, with_user, shared=True)

    def unshare(self, run_id: str, with_user: str | None = None) -> list[str]:
        return self._set_share(run_id, with_user, shared=False)

    def _set_share(self, run_id: str, with_user: str | None, *, shared: bool) -> list[str]:
        run = self._changeable(run_id)
        access = self.services.access
        try:
            (access.share if shared else access.unshare)(self.viewer, run, with_user)
        except LookupError as exc:  # nobody of that email has signed in
            raise BadRequest(str(exc)) from exc
        return self.shares(run_id)

    def shares(self, run_id: str) -> list[str]:
        self.get(run_id)
        return self.services.access.shared_with(run_id, everyone="everyone")

    def status(self, run_id: str, *, nodes: bool = False) -> dict[str, Any]:
        """The run with its progress (nodes by status); with `nodes`, also each node's id, parent,
        kind, label and status (the ids steering commands name)."""
        run = self.get(run_id)
        counts: dict[str, int] = {}
        stored = self.services.reads.snapshot(run_id).nodes
        for node in stored:
            counts[node.status] = counts.get(node.status, 0) + 1
        view = run_view(run, counts)
        if nodes:
            view["nodes"] = [
                {"id": n.id, "parent_id": n.parent_id, "kind": n.kind, "label": n.label, "status": n.status}
                for n in stored
            ]
        return view

    def runs(
        self,
        *,
        status: str | None = None,
        method: str | None = None,
        text: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[Run]:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 500:
            raise BadRequest(f"limit must be a whole number from 1 to 500 (got {limit!r})")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise BadRequest(f"offset must be a whole number, 0 or more (got {offset!r})")
        from engine.reads import RunStatus

        if status is not None and status not in RunStatus.ALL:
            raise BadRequest(f"unknown status '{status}'; choose one of: {', '.join(RunStatus.ALL)}")
        if self.viewer is NOBODY:
            return []
        return self.services.reads.list_runs(
            text=text,
            method=method,
            status=status,
            limit=limit,
            offset=offset,
            visible_to=self.services.access.visible_to(self.viewer),
        )

    def graph(self, run_id: str) -> dict[str, Any]:
        """The run's nodes, edges and sources."""
        self.get(run_id)
        snapshot = self.services.reads.snapshot(run_id)
        sources = self.services.reads.list_sources(run_id)
        return {
            "run": run_view(snapshot.run),
            "nodes": [{**node_data(n), "data": n.data, "created_at": n.created_at.isoformat()} for n in snapshot.nodes],
            "edges": [edge_data(e) for e in snapshot.edges],
            "sources": [
                {"id": s.id, "ref": s.ref, "kind": s.kind, "url": s.url, "title": s.title, "snippet": s.snippet}
                for s in sources
            ],
        }

    def wait(self, run_id: str, timeout: float | None = None) -> Run:
        """The run once it is no longer active, or as it is after `timeout` seconds."""
        from engine.reads import RunStatus

        self.get(run_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        subscription = self.feed.subscribe(run_id)
        try:
            while True:
                run = self.get(run_id)
                if run.status not in RunStatus.ACTIVE:
                    return run
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return run
                if subscription.finished():  # its watch saw the run end, and it was reopened since
                    subscription.close()
                    subscription = self.feed.subscribe(run_id)
                subscription.wait(min(left, 1.0) if left is not None else 1.0)
        finally:
            subscription.close()

    def events(self, run_id: str, *, after: int | None = None, timeout: float | None = None) -> Iterator[FeedEvent]:
        """The run's events (see `engine/service/feed.py`) until it ends, or until `timeout` seconds
        pass with none. `after`: a cursor from an earlier event, to resume where it stopped."""
        from engine.reads import RunNotFound

        self.get(run_id)
        try:
            subscription = self.feed.subscribe(run_id, after)
        except RunNotFound as exc:
            raise NotFound(str(exc)) from exc
        try:
            while True:
                batch = subscription.wait(timeout)
                if not batch:
                    return
                for event in batch:
                    yield event
                    if event.kind == "end":
                        return
        finally:
            subscription.close()

    # ------------------------------------------------------------------ steering and control

    def steer(self, run_id: str, command: str, payload: Mapping[str, Any] | None = None) -> Command:
        """Queue one of the method's declared commands (`methods()` lists them), checked as the app
        checks it; a run that is not executing is reopened to apply it."""
        from engine.contract import CommandRejected, UnsupportedCommand
        from engine.runner import RunnerError

        run = self._changeable(run_id)
        try:
            self.services.access.check_may_run(self.viewer, run)  # a finished run is reopened to apply it
        except LimitReached as exc:
            raise Conflict(str(exc)) from exc
        spec = (
            self.services.methods[run.method].contract().commands.get(command)
            if run.method in self.services.methods
            else None
        )
        if spec is None:
            known = (
                ", ".join(sorted(self.services.methods[run.method].contract().commands))
                if run.method in self.services.methods
                else ""
            )
            raise BadRequest(
                f"method '{run.method}' has no command '{command}'" + (f"; its commands: {known}" if known else "")
            )
        if payload is not None and not isinstance(payload, Mapping):
            raise BadRequest(f"the payload must be an object (got {type(payload).__name__})")
        try:
            parsed = spec.parse(dict(payload or {}))
            if not (spec.report_only and self.services.methods[run.method].report_without_model):
                self.prepare(run.llm_info.get("kind", "openai"))
            return self.services.runner.steer(run_id, command, parsed.model_dump(mode="json"))
        except (CommandRejected, UnsupportedCommand) as exc:
            raise BadRequest(str(exc)) from exc
        except RunnerError as exc:
            raise Conflict(str(exc)) from exc

    def pause(self, run_id: str) -> Run:
        from engine.reads import RunStatus

        run = self._changeable(run_id)
        if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
            raise Conflict(f"run {run_id} is {run.status}: only a queued or running run can be paused")
        self.services.runner.pause(run_id)
        return self.get(run_id)

    def resume(self, run_id: str, *, max_tokens: int | None = None, max_cost: float | None = None) -> Run:
        from engine.llm.accounting import budget_short
        from engine.runner import RunnerError

        _positive("max_tokens", max_tokens, whole=True)
        _positive("max_cost", max_cost, whole=False)
        run = self._changeable(run_id)
        runner = self.services.runner
        try:
            self.services.access.check_may_run(self.viewer, run)  # the person's own limits
        except LimitReached as exc:
            raise Conflict(str(exc)) from exc
        try:
            if not runner.is_active(run_id):
                runner.check_resumable(run)
            if short := budget_short(run, max_tokens=max_tokens, max_cost=max_cost):
                field = "max_cost" if short.dimension == "cost" else "max_tokens"
                raise Conflict(f"run {run_id}'s budget is spent ({short}); resume it with a larger {field}")
            self.prepare(run.llm_info.get("kind", "openai"))
            runner.resume(run_id, max_tokens=int(max_tokens) if max_tokens is not None else None, max_cost=max_cost)
        except RunnerError as exc:
            raise Conflict(str(exc)) from exc
        return self.get(run_id)

    def stop(self, run_id: str) -> Run:
        from engine.reads import RunStatus

        run = self._changeable(run_id)
        if run.status not in RunStatus.ACTIVE:
            raise Conflict(f"run {run_id} is already {run.status}")
        self.services.runner.stop(run_id)
        return self.get(run_id)

    def delete(self, run_id: str) -> None:
        from engine.runner import RunnerError

        self._changeable(run_id)
        try:
            self.services.runner.delete(run_id)
        except RunnerError as exc:
            raise Conflict(str(exc)) from exc

    # ------------------------------------------------------------------ reports

    def report(self, run_id: str, format: str = "md") -> str | bytes | dict[str, Any]:
        """The run's report: Markdown text (md), its structure (json), or a file's bytes (pdf, docx)."""
        if format not in REPORT_FORMATS:
            raise BadRequest(f"unknown report format '{format}'; choose one of: {', '.join(REPORT_FORMATS)}")
        self.get(run_id)
        reads = self.services.reads
        if format == "md":
            return reads.markdown(run_id)
        if format == "json":
            return reads.export_json(run_id)
        import engine.export
        from engine.export.pdf import PdfFontMissing

        writer = engine.export.to_pdf if format == "pdf" else engine.export.to_docx
        try:
            return writer(reads.document(run_id))
        except PdfFontMissing as exc:
            raise Conflict(str(exc)) from exc

    # ------------------------------------------------------------------ the model

    def _check_llm(self, choice: str) -> str:
        if choice not in LLM_CHOICES:
            raise BadRequest(f"unknown llm '{choice}'; choose one of: {', '.join(LLM_CHOICES)}")
        return choice

    def _resolve(self, choice: str) -> str:
        settings = self.services.settings
        return self.services.resolve_llm(cast(LLMChoice, choice), settings.llm.api_key)

    def prepare(self, kind: str) -> None:
        """The model's client made and its endpoint checked, once per kind: BadRequest when a key is
        missing or refused, Conflict when the endpoint cannot serve (down, no such model)."""
        if kind in self._prepared or kind == "fake":
            return
        if self.services.queue is not None and kind == "local":
            return  # a worker starts its own built-in model
        from engine.llm.protocol import LLMAuthError, LLMError

        try:
            llm = self.services.llm(kind)
            preflight = getattr(llm, "preflight", None)
            if preflight is not None:
                preflight()
        except LLMAuthError as exc:
            raise BadRequest(exc.user_message) from exc
        except LLMError as exc:
            raise Conflict(exc.user_message) from exc
        self._prepared.add(kind)

    def describe_llm(self, choice: str | None = None) -> str:
        """What runs use by default (or with `choice`), in words: the model and where it runs."""
        kind = self._resolve(choice or self.default_llm)
        return str(self.services.llm_info(kind).get("description", kind))

    def prepared(self, kind: str) -> None:
        """Record that `kind`'s endpoint was checked by the caller (the CLI checks it in its own words)."""
        self._prepared.add(kind)


def _jsonable(value: object) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, list, dict))
