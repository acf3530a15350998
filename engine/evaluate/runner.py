"""The benchmark runner: a dataset's items × methods, each a stored run, within one budget.

`create` checks everything a person can get wrong (dataset, methods, parameters, limit) before
anything is stored, then stores the benchmark with all its (item, method) rows at once. `execute`
works through the rows that are not finished, `concurrency` runs at a time: a row without a run gets
one (with the item's search exclusions), a row whose run was interrupted (the process was killed)
has it resumed from its stored graph, and a finished run is scored. A killed benchmark therefore
continues where it stopped: finished items are not run again, nor the finished nodes of the runs
that were under way.

The budget (`max_cost`, `max_tokens`) is the whole benchmark's: what the runs and the scoring spent
is added up before each new run starts, no new run starts once it is reached, and each run is given
what is left as its own budget (so concurrent runs can overshoot it by at most their last calls).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.evaluate.datasets import DEFAULT_SEED, Item, get_dataset, items_by_id, load_items
from engine.evaluate.item_judges import ITEM_JUDGES, judge_item
from engine.evaluate.reader import reader_version
from engine.evaluate.results import HARNESS_ERROR, JUDGE_ERROR, JUDGED
from engine.evaluate.run_report import JudgeInputError, load_judged_run
from engine.evaluate.scoring import score_item, usage_metrics
from engine.llm.accounting import budget_short, stopped_by_budget
from engine.llm.counted import BudgetSpent, EvalLLM, EvalUsage
from engine.llm.protocol import LLMError
from engine.methods.params import ParamError, build_params_with_profile, profile_for_llm
from engine.methods.registry import UnknownMethod
from storage.evaluation import EvaluationStore, ItemStatus, llm_identity
from storage.models import Benchmark, BenchmarkItem, BenchmarkStatus, Run, stored_id
from storage.repository import RunNotFound, new_run_id
from storage.statuses import RunStatus

if TYPE_CHECKING:  # only for annotations: the services import this module
    from engine.services import Services

log = logging.getLogger(__name__)

# How often a waiting worker looks at its run (a run's end also wakes it at once).
WAIT_S = 0.5
MAX_CONCURRENCY = 16


class BenchmarkError(ValueError):
    """Bad benchmark input (methods, parameters, limit, concurrency): says what to change."""


@dataclass
class BenchmarkSpec:
    dataset: str
    methods: list[str]
    limit: int | None = None
    seed: int = DEFAULT_SEED
    # --param values: "key" applies to every method that has the parameter, "method.key" to one.
    values: dict[str, Any] = field(default_factory=dict)
    llm: str = "fake"  # a resolved LLM kind: fake, local or openai
    profile: str = "auto"  # auto: quick on the built-in model, else the paper's values
    search_mode: str = "local"
    max_cost: float | None = None
    max_tokens: int | None = None
    concurrency: int = 2
    judges: tuple[str, ...] = ()  # LLM-judged scores per item: claims, density, rubric (item_judges.py)
    balance: str | None = None  # an item meta key (level): the sample holds an equal share of each value
    user_id: int | None = None  # whose benchmark (and item runs); None: the local user


Progress = Callable[[BenchmarkItem], None]


def split_values(values: Mapping[str, Any], methods: Sequence[str], services: Services) -> dict[str, dict[str, Any]]:
    """`--param` values per method: `key=v` goes to each method that has `key`, `method.key=v` to that
    method only; a key no chosen method has is an error naming the methods' parameters."""
    per_method: dict[str, dict[str, Any]] = {m: {} for m in methods}
    for key, value in values.items():
        target, dot, name = key.partition(".")
        if dot:
            if target not in per_method:
                raise BenchmarkError(
                    f"--param {key}: '{target}' is not one of the benchmark's methods ({', '.join(methods)})"
                )
            per_method[target][name] = value
            continue
        takers = [m for m in methods if key in services.method(m).Params.model_fields]
        if not takers:
            raise BenchmarkError(
                f"--param {key}: none of the methods {', '.join(methods)} has a parameter "
                f"'{key}' (see: thoughtmap methods); use method.{key}=value for one method"
            )
        for m in takers:
            per_method[m][key] = value
    return per_method


class BenchmarkRunner:
    def __init__(self, services: Services, *, reader: EvalLLM | None = None) -> None:
        self.services = services
        self.store = EvaluationStore(services.db)
        self._reader = reader
        self._background: dict[str, tuple[threading.Thread, threading.Event]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------ in the background

    def start(self, benchmark_id: str) -> None:
        """Execute a benchmark in a background thread (the app): one per benchmark per process.
        BenchmarkError at once when it cannot continue here (another model), so the page says why."""
        self.check_same_llm(self.store.get_benchmark(benchmark_id))
        with self._lock:
            current = self._background.get(benchmark_id)
            if current is not None and current[0].is_alive():
                return
            stop = threading.Event()
            thread = threading.Thread(
                target=self._execute_logged, args=(benchmark_id, stop), name=f"bench-{benchmark_id}", daemon=True
            )
            self._background[benchmark_id] = (thread, stop)
        thread.start()

    def _execute_logged(self, benchmark_id: str, stop: threading.Event) -> None:
        try:
            self.execute(benchmark_id, stop=stop)
        except Exception as exc:  # noqa: BLE001 - a background thread has no caller to tell
            log.exception("benchmark %s failed", benchmark_id)
            self.store.set_benchmark_status(benchmark_id, BenchmarkStatus.FAILED, f"{type(exc).__name__}: {exc}")

    def is_active(self, benchmark_id: str) -> bool:
        with self._lock:
            current = self._background.get(benchmark_id)
        return current is not None and current[0].is_alive()

    def stop(self, benchmark_id: str) -> None:
        """Stop a background benchmark: its runs under way stop and stay resumable."""
        with self._lock:
            current = self._background.get(benchmark_id)
        if current is not None:
            current[1].set()

    # ---------------------------------------------------------------- create

    def create(self, spec: BenchmarkSpec) -> Benchmark:
        if not spec.methods:
            raise BenchmarkError("name at least one method, e.g. --methods direct,rag,deot")
        if len(set(spec.methods)) != len(spec.methods):
            raise BenchmarkError(f"a method is named twice in --methods {','.join(spec.methods)}")
        unknown = [j for j in spec.judges if j not in ITEM_JUDGES]
        if unknown:
            raise BenchmarkError(
                f"unknown judge {', '.join(map(repr, unknown))}; choose from: {', '.join(ITEM_JUDGES)}"
            )
        if not 1 <= spec.concurrency <= MAX_CONCURRENCY:
            raise BenchmarkError(f"--concurrency must be 1 to {MAX_CONCURRENCY} (got {spec.concurrency})")
        get_dataset(spec.dataset)  # DatasetError names the datasets
        try:
            for method in spec.methods:
                self.services.method(method)
        except UnknownMethod as exc:
            raise BenchmarkError(str(exc)) from exc
        profile = profile_for_llm(spec.llm) if spec.profile == "auto" else spec.profile
        params: dict[str, dict[str, Any]] = {}
        for method, values in split_values(spec.values, spec.methods, self.services).items():
            try:
                built = build_params_with_profile(
                    self.services.method(method).Params, values, method=method, profile=profile
                )
            except ParamError as exc:
                raise BenchmarkError(str(exc)) from exc
            params[method] = built.model_dump(mode="json")
        items = load_items(spec.dataset, limit=spec.limit, seed=spec.seed, balance=spec.balance)
        return self.store.create_benchmark(
            dataset=spec.dataset,
            methods=spec.methods,
            items=[i.id for i in items],
            limit=len(items),
            seed=spec.seed,
            params=params,
            llm_info=self.services.llm_info(spec.llm),
            search_mode=spec.search_mode,
            max_cost=spec.max_cost,
            max_tokens=spec.max_tokens,
            concurrency=spec.concurrency,
            judges=spec.judges,
            balance=spec.balance or "",
            user_id=spec.user_id,
        )

    def stop_all(self) -> None:
        with self._lock:
            benchmark_ids = list(self._background)
        for benchmark_id in benchmark_ids:
            self.stop(benchmark_id)

    # --------------------------------------------------------------- execute

    def execute(
        self, benchmark_id: str, *, progress: Progress | None = None, stop: threading.Event | None = None
    ) -> Benchmark:
        """Run (or continue) a benchmark until every row is finished, the budget is spent or `stop`
        is set; returns the benchmark with its final status."""
        bench = self.store.get_benchmark(benchmark_id)
        self.check_same_llm(bench)
        self.services.runner.recover_interrupted()
        stop = stop or threading.Event()
        rows = [r for r in self.store.list_items(bench.id) if r.status not in ItemStatus.FINISHED]
        items = items_by_id(bench.dataset, sorted({r.item_id for r in rows}))
        self.store.set_benchmark_status(bench.id, BenchmarkStatus.RUNNING)
        budget = _BudgetGate(self, bench)
        reader = self.reader_for(bench)

        def work(row: BenchmarkItem) -> None:
            if stop.is_set() or budget.spent_out():
                return
            row_id = stored_id(row)
            try:
                self._do_row(bench, row, items[row.item_id], budget, stop, reader)
            except Exception as exc:  # noqa: BLE001 - one item's failure must not end the benchmark
                log.exception("benchmark %s item %s/%s failed", bench.id, row.item_id, row.method)
                self._harness_error(bench, row_id, exc)
            if progress is not None:
                progress(self.store.get_item(row_id))

        with ThreadPoolExecutor(max_workers=bench.concurrency, thread_name_prefix=f"bench-{bench.id}") as pool:
            list(pool.map(work, rows))
        left = [r for r in self.store.list_items(bench.id) if r.status not in ItemStatus.FINISHED]
        if not left:
            self.store.set_benchmark_status(bench.id, BenchmarkStatus.DONE)
        elif budget.spent_out():
            self.store.set_benchmark_status(
                bench.id,
                BenchmarkStatus.STOPPED,
                f"the {_BUDGET_NAMES[budget.reached()]} budget {_BUDGET_REACHED} {len(left)} runs "
                f"left; raise it to continue: thoughtmap bench --resume {bench.id} "
                f"{_RAISE_FLAGS[budget.reached()]}",
            )
        else:
            self.store.set_benchmark_status(
                bench.id, BenchmarkStatus.STOPPED, f"stopped with {len(left)} runs left; resume to finish"
            )
        return self.store.get_benchmark(bench.id)

    def spent(self, benchmark_id: str) -> tuple[int, float]:
        """Tokens and dollars the benchmark has spent so far: its runs and its scoring."""
        return _BudgetGate(self, self.store.get_benchmark(benchmark_id))._spent()

    def raise_budget(self, benchmark_id: str, *, max_tokens: int | None = None, max_cost: float | None = None) -> None:
        """A new budget for a benchmark to resume on (each given value replaces the stored one).
        BenchmarkError when a value is not more than what the benchmark has spent: resumed on it,
        it would stop again at once."""
        tokens, cost = self.spent(benchmark_id)
        if max_tokens is not None and max_tokens <= tokens:
            raise BenchmarkError(
                f"benchmark {benchmark_id} has spent {tokens:,} tokens already: a token budget of "
                f"{max_tokens:,} would stop it again at once; give more than {tokens:,}"
            )
        if max_cost is not None and max_cost <= cost:
            raise BenchmarkError(
                f"benchmark {benchmark_id} has spent ${cost:.4f} already: a cost budget of "
                f"${max_cost:.4f} would stop it again at once; give more than ${cost:.4f}"
            )
        self.store.set_budget(benchmark_id, max_tokens=max_tokens, max_cost=max_cost)

    def _harness_error(self, bench: Benchmark, row_id: int, exc: Exception) -> None:
        """An item the harness (not the method) failed on. Its run still working, or stopped before
        its end: left as it is, so that `--resume` continues it. Its run finished: failed, with the
        run's usage (it was spent) and the mark that the failure is the harness's (the table counts
        these apart, and leaves them out of recall); `--rescore` scores it again. No run at all
        (it could not be created): failed for good, and said so."""
        what = f"the harness failed on this item ({type(exc).__name__}: {exc})"
        run_id = self.store.get_item(row_id).run_id
        try:
            run = self.services.repo.get_run(run_id) if run_id is not None else None
        except RunNotFound:
            run = None
        if run is not None and not _finished(run):
            return  # resumed next time; the error is in the log
        kept: dict[str, Any] = {HARNESS_ERROR: True}
        if run is not None:
            try:
                kept.update(usage_metrics(self.services.repo, run))
            except Exception:  # noqa: BLE001 - the usage is a bonus; the mark must be stored
                log.exception("benchmark item %s: its run's usage could not be read", row_id)
        again = (
            f"; `thoughtmap bench --rescore {bench.id}` scores it again"
            if run is not None
            else "; it has no run to score"
        )
        self.store.finish_item(
            row_id, status=ItemStatus.FAILED, prediction="", metrics=kept, eval_usage={}, error=what + again
        )

    def _do_row(
        self,
        bench: Benchmark,
        row: BenchmarkItem,
        item: Item,
        budget: _BudgetGate,
        stop: threading.Event,
        reader: EvalLLM,
    ) -> None:
        runner = self.services.runner
        run_id = row.run_id
        if run_id is None or not self._stored(run_id):
            if run_id is None:
                # The id goes on the item first, then the run is made under it: a process killed
                # between the two leaves an id that the next execute creates the run under (below),
                # never a second run for the item (made first, the run was left unreferenced).
                run_id = new_run_id()
                self.store.attach_run(stored_id(row), run_id)
            max_tokens, max_cost = budget.left()
            runner.create_run(
                question=item.question,
                method=row.method,
                params=bench.params.get(row.method, {}),
                llm_info=bench.llm_info,
                search_mode=bench.search_mode,
                max_tokens=max_tokens,
                max_cost=max_cost,
                search_exclusions=item.exclusions.model_dump() if item.exclusions else None,
                run_id=run_id,
                user_id=bench.user_id,  # the benchmark's person owns its runs
            )
            runner.start(run_id)
        else:
            run = self.services.repo.get_run(run_id)
            if run.status in RunStatus.RESUMABLE and run.status != RunStatus.FAILED:
                # A run's budget counts all it spent: what it has, plus what the benchmark has left.
                max_tokens, max_cost = budget.left()
                spent_tokens, spent_cost = self.services.repo.run_usage(run_id)
                max_tokens = None if max_tokens is None else spent_tokens + max_tokens
                max_cost = None if max_cost is None else spent_cost + max_cost
                if stopped_by_budget(run) and budget_short(run, max_tokens=max_tokens, max_cost=max_cost):
                    budget.stopped(run)  # what is left cannot pay its next call: raise the budget first
                    return
                runner.resume(run_id, max_tokens=max_tokens, max_cost=max_cost)
        stop_sent = False
        while self._in_flight(run_id):
            if stop.is_set() and not stop_sent:
                runner.stop(run_id)  # once: a stop queued again each wait would outlive this process
                stop_sent = True
            runner.wait(run_id, timeout=WAIT_S)
        run = self.services.repo.get_run(run_id)
        if run.status not in (RunStatus.DONE, RunStatus.FAILED, RunStatus.STOPPED):
            return  # left resumable (e.g. paused from the app): the next execute continues it
        if stopped_by_budget(run):
            budget.stopped(run)
        if run.status == RunStatus.STOPPED and (stop.is_set() or stopped_by_budget(run)):
            # Stopped by the person, or by the benchmark's budget: not finished, resumed next time
            # (with a raised budget: `--resume ID --max-cost X`). Scored now, a budget stop was a
            # method's failure for good, and fell on whichever runs were under way when it came.
            return
        usage = EvalUsage()
        counted = reader.with_usage(usage)
        prediction, scores, error = score_item(self.services.repo, run_id, item, counted)
        # The run's outcome decides: a reader that could not read an answered run scores it 0 and
        # says so (`reader_error`), but it is no failure of the method.
        answered = run.status == RunStatus.DONE
        if answered and bench.judges:
            scores.update(self._judge(bench, run_id, item, counted))
        self.store.finish_item(
            stored_id(row),
            status=ItemStatus.SCORED if answered else ItemStatus.FAILED,
            prediction=prediction[:20000],
            metrics=scores,
            eval_usage=usage.as_dict(),
            error=error or scores.get("reader_error", ""),
        )

    def rescore(self, benchmark_id: str, *, progress: Progress | None = None) -> Rescored:
        """Score every finished item again from its stored run, with this release's scoring (after a
        fix to a metric or to the reader). The reader is asked again only where its reading does not
        exist yet, failed or came from another version of its prompt (`reader.reader_version`); LLM
        judges' scores are kept as they were, and the judges are asked again only where one failed
        (JUDGE_ERROR). Items whose run is not stored here (imported from a file) keep their scores.

        The benchmark's budget holds here too: once what its runs and scoring spent reaches it, an
        item that would need the reader or a judge again keeps its scores as they were (`left`
        counts them; raise the budget and rescore again). Items that need no LLM call are always
        scored again."""
        bench = self.store.get_benchmark(benchmark_id)
        finished = [(r, r.run_id) for r in self.store.list_items(bench.id) if r.status in ItemStatus.FINISHED]
        rows = [(r, run_id) for r, run_id in finished if run_id and self._stored(run_id)]
        items = items_by_id(bench.dataset, sorted({r.item_id for r, _ in rows}))
        judged_again = {r.id for r, _ in rows if bench.judges and r.metrics.get(JUDGE_ERROR)}
        tally = EvalUsage()  # what this rescore's calls spend, added to what was spent before it
        reader = self.reader_for(bench).with_usage(tally).with_gate(self._rescore_gate(bench, tally))
        scored, left, reached = 0, 0, ""
        for row, run_id in rows:
            usage = EvalUsage()
            known = _reading_to_keep(row, items[row.item_id])
            try:
                prediction, scores, error = score_item(
                    self.services.repo, run_id, items[row.item_id], reader.with_usage(usage), known_reading=known
                )
            except BudgetSpent as exc:  # it needs the reader again, and the budget is spent: kept as it was
                left, reached = left + 1, exc.reached
                continue
            # The judges' scores stay (they are not asked again), and so does anything else this
            # scoring does not compute; a reader error it did not meet again is gone, and so is the
            # version of a reading this scoring did not ask the reader for.
            kept = {
                k: v
                for k, v in row.metrics.items()
                if k not in ("reader_error", "reader_version", HARNESS_ERROR, JUDGE_ERROR)
                and (k not in scores or (bench.judges and k in JUDGED))
            }
            scores = {**scores, **kept}
            run = self.services.repo.get_run(run_id)
            if row.id in judged_again and run.status == RunStatus.DONE:
                try:
                    scores.update(self._judge(bench, run_id, items[row.item_id], reader.with_usage(usage)))
                except BudgetSpent as exc:  # its judges wait for a raised budget, and say so meanwhile
                    left, reached = left + 1, exc.reached
                    scores[JUDGE_ERROR] = row.metrics[JUDGE_ERROR]
            spent = {k: row.eval_usage.get(k, 0) + v for k, v in usage.as_dict().items() if isinstance(v, (int, float))}
            self.store.finish_item(
                stored_id(row),
                status=ItemStatus.SCORED if run.status == RunStatus.DONE else ItemStatus.FAILED,
                prediction=prediction[:20000],
                metrics=scores,
                eval_usage={**row.eval_usage, **spent},
                error=error or scores.get("reader_error", ""),
            )
            scored += 1
            if progress is not None:
                progress(self.store.get_item(stored_id(row)))
        return Rescored(scored=scored, left=left, reached=reached)

    def _rescore_gate(self, bench: Benchmark, tally: EvalUsage) -> Callable[[], None]:
        """Checked before each reader or judge call of a rescore: the benchmark's model (on the first
        call: a rescore that asks nothing runs on any), then its budget, from what was spent before
        the rescore (read once) plus `tally`."""
        before = _BudgetGate(self, bench)._spent()
        checked: list[bool] = []

        def gate() -> None:
            if not checked:
                self.check_same_llm(bench)  # a reading or verdict asked again must come from the benchmark's model
                checked.append(True)
            now = tally.as_dict()
            if reached := _over_budget(
                bench, before[0] + int(now["prompt_tokens"] + now["completion_tokens"]), before[1] + now["cost"]
            ):
                raise BudgetSpent(reached)

        return gate

    def _in_flight(self, run_id: str) -> bool:
        """The run executes here, or (queue mode) a worker has it or will take it: the item waits
        for it either way, so the benchmark keeps its concurrency and its budget per run."""
        runner = self.services.runner
        if runner.is_active(run_id):
            return True
        return runner.dispatch is not None and self.services.repo.get_run(run_id).status in RunStatus.ACTIVE

    def _stored(self, run_id: str) -> bool:
        try:
            self.services.repo.get_run(run_id)
        except RunNotFound:
            return False
        return True

    def _judge(self, bench: Benchmark, run_id: str, item: Item, llm: EvalLLM) -> dict[str, Any]:
        """The benchmark's LLM judges on one answered item (their calls count in `llm`'s usage); a
        judge that fails is noted with the item, not fatal."""
        try:
            scores, _judged = judge_item(
                self.store,
                llm,
                load_judged_run(self.services.repo, run_id),
                item,
                tuple(bench.judges),
                benchmark_id=bench.id,
            )
        except (JudgeInputError, LLMError) as exc:
            return {JUDGE_ERROR: str(getattr(exc, "user_message", exc))[:500]}
        return scores

    def check_same_llm(self, bench: Benchmark) -> None:
        """A benchmark continues on the model it started on: its rows would otherwise mix two models
        under one header. BenchmarkError says which differ and what to do."""
        kind = bench.llm_info.get("kind", "openai")
        here = self.services.llm_info(kind)
        if llm_identity(here) != llm_identity(bench.llm_info):
            raise BenchmarkError(
                f"benchmark {bench.id} ran on {bench.llm_info.get('description') or bench.llm_info.get('model')}, "
                f"and this {kind} LLM is {here.get('description') or here.get('model')}: continuing would mix two "
                "models in one table. Set the same model (THOUGHTMAP_MODEL, OPENAI_BASE_URL or "
                "THOUGHTMAP_LOCAL_MODEL) to continue it, or start a new benchmark."
            )

    def reader_for(self, bench: Benchmark) -> EvalLLM:
        """The reader runs on the benchmark's own LLM unless one was given (THOUGHTMAP_MODEL_READER
        picks another model of the same endpoint)."""
        if self._reader is not None:
            return self._reader
        return EvalLLM(self.services.llm(bench.llm_info.get("kind", "openai")), self.services.prices)


# How the runner names a budget ("tokens" or "cost", `_BudgetGate.reached`) to a reader, and the
# flag that raises it.
_BUDGET_NAMES = {"tokens": "token", "cost": "cost"}
_RAISE_FLAGS = {"tokens": "--max-tokens N", "cost": "--max-cost DOLLARS"}
_BUDGET_REACHED = "was reached with"


@dataclass(frozen=True)
class Rescored:
    """What a rescore did: items scored again, and items left as they were because the benchmark's
    budget was spent before their reader or judges could be asked again."""

    scored: int
    left: int = 0
    reached: str = ""  # the budget that stopped it, "tokens" or "cost", when left > 0

    def budget_note(self, benchmark_id: str) -> str:
        """What to do about the items left (empty when none was)."""
        if not self.left:
            return ""
        return (
            f"the {_BUDGET_NAMES[self.reached]} budget of benchmark {benchmark_id} was reached: {self.left} "
            f"items that need the reader or a judge again keep their old scores; raise the budget and score "
            f"them: thoughtmap bench --rescore {benchmark_id} {_RAISE_FLAGS[self.reached]}"
        )


def budget_that_stopped(bench: Benchmark) -> str | None:
    """ "token" or "cost": the budget that stopped this benchmark (its note says so), else None. The
    app says it in its own words, with the inputs to raise it, instead of the CLI's command."""
    stopped = re.match(
        rf"the (token|cost)s? budget {_BUDGET_REACHED} ", bench.note or ""
    )  # "tokens": before 2026-11-28
    return stopped.group(1) if stopped and bench.status == BenchmarkStatus.STOPPED else None


def _over_budget(bench: Benchmark, tokens: int, cost: float) -> str | None:
    """The benchmark's budget that this spending reaches, "tokens" or "cost"; None while under both."""
    if bench.max_tokens is not None and tokens >= bench.max_tokens:
        return "tokens"
    if bench.max_cost is not None and cost >= bench.max_cost:
        return "cost"
    return None


class _BudgetGate:
    """The benchmark's budget, read from what its runs and its scoring have spent so far. A run the
    budget stopped also spends it out: a run stops before the call that would pass the budget, so
    what is left may be more than nothing and still pay no call (and every run started on it would
    stop at once)."""

    def __init__(self, owner: BenchmarkRunner, bench: Benchmark) -> None:
        self.owner = owner
        self.bench = bench
        self._stopped_on: str | None = None  # "tokens" or "cost": the budget a run was stopped by

    def stopped(self, run: Run) -> None:
        self._stopped_on = "tokens" if "token budget reached" in (run.stop_reason or "") else "cost"

    def reached(self) -> str:
        """Which budget ran out: "tokens" or "cost"."""
        if self._stopped_on is not None:
            return self._stopped_on
        return _over_budget(self.bench, *self._spent()) or "cost"

    def _spent(self) -> tuple[int, float]:
        tokens, cost = 0, 0.0
        for row in self.owner.store.list_items(self.bench.id):
            if row.run_id:
                try:
                    run_tokens, run_cost = self.owner.services.repo.run_usage(row.run_id)
                except RunNotFound:  # its id is on the item and the run is being made: nothing spent
                    run_tokens, run_cost = 0, 0.0
                tokens += run_tokens
                cost += run_cost
            tokens += int(row.eval_usage.get("prompt_tokens", 0)) + int(row.eval_usage.get("completion_tokens", 0))
            cost += float(row.eval_usage.get("cost", 0.0))
        return tokens, cost

    def left(self) -> tuple[int | None, float | None]:
        if self.bench.max_tokens is None and self.bench.max_cost is None:
            return None, None
        tokens, cost = self._spent()
        return (
            None if self.bench.max_tokens is None else max(1, self.bench.max_tokens - tokens),
            None if self.bench.max_cost is None else max(1e-9, self.bench.max_cost - cost),
        )

    def spent_out(self) -> bool:
        if self._stopped_on is not None:
            return True
        if self.bench.max_tokens is None and self.bench.max_cost is None:
            return False
        return _over_budget(self.bench, *self._spent()) is not None


__all__ = ["BenchmarkError", "BenchmarkRunner", "BenchmarkSpec", "Rescored", "budget_that_stopped", "split_values"]


def _reading_to_keep(row: BenchmarkItem, item: Item) -> str | None:
    """The reader's stored reading of this item, when a rescore may reuse it: one that succeeded,
    with this version of its prompt (readings stored before versions were recorded are version 1)."""
    metrics = row.metrics
    if (
        metrics.get("answer_source") == "reader"
        and not metrics.get("reader_error")
        and metrics.get("reader_version", 1) == reader_version(item.answer_type == "yesno")
    ):
        return row.prediction
    return None


def _finished(run: Run) -> bool:
    """The run ended for good: done, failed, or stopped by the person (a budget stop is resumed)."""
    return run.status in (RunStatus.DONE, RunStatus.FAILED) or (
        run.status == RunStatus.STOPPED and not stopped_by_budget(run)
    )
