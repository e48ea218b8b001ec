"""Pipeline transforms: one SQL query, or a chain of SQL and Python steps run in order.

``transform:`` in a pipeline file is either one step or a list of steps::

    transform:
      - name: clean
        sql: SELECT * FROM {source} WHERE fare >= 0
      - name: enrich
        python: my_transforms:add_fare_band        # module:function, imported at load time
      - sql: SELECT driver, dt, fare_band, count(*) AS n FROM {previous} GROUP BY driver, dt, fare_band

A SQL step reads views by placeholder: ``{source}`` (the batch), ``{previous}`` (the output of the step before; not
in the first step), ``{source_snapshot}`` (a table source as of the batch's end), ``{target}`` and every named
secondary source of the pipeline (:mod:`governance.secondary_sources`). The first step reads ``{source}``; every
later SQL step reads ``{previous}``, or the steps before it would be lost.

A Python step is a function ``f(df: DataFrame, ctx: TransformContext) -> DataFrame``: ``df`` is the output of the
step before (the batch for the first step) and ``ctx`` gives the same views (``ctx.view("drivers")``), the batch's
positions and the session. It runs on the driver and builds a plan; it must not collect the batch. The module is
looked up on ``sys.path`` and then in the pipeline file's folder; executors import it only if the function ships
Python code to them (a UDF), so such a module must be installed where the executors run.

An error in a step, at load time (an unknown view, SQL that does not parse, a module that cannot be imported) or at
run time (analysis errors, a Python exception, a result that is not a DataFrame), names the step:
``transform step 2 'enrich' (python my_transforms:add_fare_band): KeyError: 'fare'``.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Tag, field_validator
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from governance.errors import PipelineConfigError, TransformError
from tablecore.spark.jvm import recompute_is_cheap, release_local_checkpoint
from validators.sql_checks import register_temp_view
from validators.sql_text import parse_problem, placeholders, substitute

__all__ = ["BUILTIN_VIEWS", "LocatedError", "PythonStep", "SqlStep", "Transform", "TransformContext", "TransformStep",
           "ViewSet", "check_steps", "load_callable", "run_steps", "step_label"]

logger = logging.getLogger(__name__)

BUILTIN_VIEWS = ("source", "source_snapshot", "target", "previous")
"""Views every pipeline's SQL steps may read (secondary sources add their own names)."""

_CALLABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


class SqlStep(BaseModel):
    """A SQL step: one query over the views (see the module docstring).

    Attributes:
        name: a name for messages and the run report (default: ``step N``).
        sql: the query.
        persist: keep the step's output once computed, for the rest of the batch (see :class:`ViewSet.keep`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str | None = None
    sql: str
    persist: bool = False

    @field_validator("sql")
    @classmethod
    def _parses(cls, v: str) -> str:
        problem = parse_problem(substitute(v, {n: f"__lakegate_{n}" for n in placeholders(v)}))
        if problem:
            raise ValueError(f"the transform does not parse: {problem}")
        return v


class PythonStep(BaseModel):
    """A Python step: ``module:function``, called as ``function(df, ctx)`` and returning a DataFrame.

    Attributes:
        name: a name for messages and the run report (default: ``step N``).
        python: the function's import path, ``package.module:function``.
        persist: keep the step's output once computed, for the rest of the batch (see :class:`ViewSet.keep`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str | None = None
    python: str
    persist: bool = False

    @field_validator("python")
    @classmethod
    def _import_path(cls, v: str) -> str:
        if not _CALLABLE.match(v):
            raise ValueError(f"{v!r} is not an import path of a function (module:function, e.g. "
                             "my_package.transforms:enrich)")
        return v


def _step_kind(value: Any) -> str:
    return "python_step" if isinstance(value, PythonStep) or (isinstance(value, dict) and "python" in value) \
        else "sql_step"


def _shape(value: Any) -> str:
    return "steps" if isinstance(value, (list, tuple)) else "step"


TransformStep = Annotated[Annotated[SqlStep, Tag("sql_step")] | Annotated[PythonStep, Tag("python_step")],
                          Discriminator(_step_kind)]
"""One step of a transform: ``{sql: ...}`` or ``{python: module:function}``."""

Transform = Annotated[Annotated[TransformStep, Tag("step")] | Annotated[list[TransformStep], Tag("steps")],
                      Discriminator(_shape)]
"""A pipeline's ``transform:``: one step, or a list of steps run in order."""


def step_label(index: int, step: TransformStep) -> str:
    """How messages name a step: ``step 2 'enrich' (python mod:fn)`` (``index`` is 0-based)."""
    named = f" {step.name!r}" if step.name else ""
    kind = f"python {step.python}" if isinstance(step, PythonStep) else "sql"
    return f"transform step {index + 1}{named} ({kind})"


class LocatedError(ValueError):
    """A configuration error found by a whole-pipeline check, with the entry it is about (``loc``, as pydantic
    locations are) so that the message can name the file's line."""

    def __init__(self, message: str, loc: tuple[str | int, ...]) -> None:
        super().__init__(message)
        self.loc = loc


def check_steps(steps: Sequence[TransformStep], views: Sequence[str], *, listed: bool = True) -> None:
    """Check that every SQL step reads known views, the first step reads ``{source}`` and every later SQL step reads
    ``{previous}``.

    Args:
        steps: the steps.
        views: the view names SQL steps may read.
        listed: the steps were written as a list (``transform[1].sql``), not as one mapping (``transform.sql``).

    Raises:
        LocatedError: the message names the step.
    """
    known = set(views)
    for n, step in enumerate(steps):
        if not isinstance(step, SqlStep):
            continue
        loc: tuple[str | int, ...] = ("transform", n, "sql") if listed else ("transform", "sql")
        used = set(placeholders(step.sql))
        allowed = known - ({"previous"} if n == 0 else set())
        unknown = sorted(used - allowed)
        if unknown:
            raise LocatedError(f"{step_label(n, step)}: unknown view(s) "
                               f"{', '.join('{' + u + '}' for u in unknown)}; known: "
                               + ", ".join("{" + t + "}" for t in sorted(allowed)), loc)
        if n == 0 and "source" not in used:
            raise LocatedError(f"{step_label(n, step)}: the transform must read {{source}}", loc)
        if n > 0 and "previous" not in used:
            raise LocatedError(f"{step_label(n, step)}: a later step must read {{previous}} (the output of the step "
                               "before), or the steps before it would be lost", loc)


def load_callable(ref: str, base_dir: Path | None) -> Callable[..., Any]:
    """The function ``module:function`` names, importing the module from ``sys.path`` or, failing that, from
    ``base_dir`` (the pipeline file's folder).

    Raises:
        PipelineConfigError: the module cannot be imported, or it has no such callable.
    """
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        folder = str(base_dir) if base_dir is not None else None
        if folder is None or e.name != module_name.split(".")[0] or folder in sys.path:
            raise PipelineConfigError(f"cannot import {module_name}: {e}") from None
        sys.path.append(folder)  # appended: a module of the pipeline's folder never shadows an installed one
        try:
            module = importlib.import_module(module_name)
        except ImportError as e2:
            raise PipelineConfigError(f"cannot import {module_name} (looked in sys.path and {folder}): {e2}") \
                from None
    except Exception as e:  # the module's own code failed while importing
        raise PipelineConfigError(f"cannot import {module_name}: {type(e).__name__}: {e}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise PipelineConfigError(f"module {module_name} ({getattr(module, '__file__', '?')}) has no function "
                                  f"{attr!r}")
    return fn


class ViewSet:
    """The views of one batch's transform, each built on first use and then reused (a view that no step reads is
    never read). :meth:`close` ends the batch's use of them.

    Args:
        makers: view name -> a function building its DataFrame.
        persist: the views to keep on the executors' local disks once built, for views read more than once
            (the batch, when its rows also choose the partitions of a secondary source), unless reading them again
            costs less (a scan of files: :func:`~tablecore.spark.jvm.recompute_is_cheap`).
    """

    def __init__(self, makers: Mapping[str, Callable[[], DataFrame]], *, persist: Collection[str] = ()) -> None:
        self._makers = dict(makers)
        self._built: dict[str, DataFrame] = {}
        self._persist = frozenset(persist)
        self._kept: list[DataFrame] = []
        self._checkpoints: list[DataFrame] = []
        self._sql_names: list[tuple[SparkSession, str]] = []

    def add(self, name: str, maker: Callable[[], DataFrame]) -> None:
        """Offer one more view."""
        self._makers[name] = maker

    def put(self, name: str, df: DataFrame) -> None:
        """Offer a view already built, in place of any before it of that name (``previous``, step after step)."""
        self._makers[name] = partial(_same, df)
        self._built[name] = df

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the views this batch offers."""
        return tuple(self._makers)

    def get(self, name: str) -> DataFrame:
        """The view ``name``.

        Raises:
            KeyError: not a view of this pipeline.
        """
        if name not in self._built:
            if name not in self._makers:
                raise KeyError(f"no view {name!r}; views: {', '.join(self._makers)}")
            df = self._makers[name]()
            if name in self._persist and not recompute_is_cheap(df):
                # on local disk, not in memory: a view's partitions can be huge (a first batch of a change feed is
                # the whole table in a few tasks), and Spark reads a spilled block back into memory whole
                df = df.persist(StorageLevel.DISK_ONLY)
                self._kept.append(df)
            self._built[name] = df
        return self._built[name]

    def keep(self, df: DataFrame) -> DataFrame:
        """``df`` kept on the executors' local disks once computed, until :meth:`close` (a step marked ``persist``):
        for a step output the next step reads more than once. A query that reads one DataFrame twice computes it
        twice (a small aggregate that is both broadcast to a join and unioned is computed for each use, and a
        semi-join that Spark pushes into each input of a union adds one computation per input); kept, it is computed
        once and read back. A scan of files is left as it is (:func:`~tablecore.spark.jvm.recompute_is_cheap`).
        Under adaptive execution the shuffle stages of ``df`` run here, when the checkpoint's plan is made; the last
        stage runs in the first job that reads it.

        A local checkpoint, not ``persist``: Spark finds a persisted plan in a later query by comparing plans, and a
        step whose SQL has a ``WITH`` clause, read by a step that has one too, no longer compares equal (Spark numbers
        the CTEs of the whole query), so it would be computed again for every use. A checkpoint is read as it is."""
        if recompute_is_cheap(df):
            return df
        kept = df.localCheckpoint(eager=False, storageLevel=StorageLevel.DISK_ONLY)
        self._checkpoints.append(kept)
        return kept

    def sql_name(self, name: str, spark: SparkSession, suffix: str) -> str:
        """The view ``name`` registered as a temporary view for a SQL step; the name stays until :meth:`close`,
        and dropping it then leaves a persisted view cached (:func:`~validators.sql_checks.register_temp_view`)."""
        view = f"__lakegate_{name}_{suffix}"
        register_temp_view(self.get(name), view)
        self._sql_names.append((spark, view))
        return view

    def close(self) -> None:
        """Drop the temporary views and unpersist the persisted views (once the batch is written or failed)."""
        for spark, view in self._sql_names:
            spark.catalog.dropTempView(view)
        for df in self._kept:
            df.unpersist()
        for df in self._checkpoints:
            release_local_checkpoint(df)
        self._sql_names.clear()
        self._kept.clear()
        self._checkpoints.clear()


@dataclass
class TransformContext:
    """What a Python step gets besides its input DataFrame.

    Attributes:
        spark: the session.
        pipeline: the pipeline's name.
        step: this step's label (``transform step 2 'enrich' (python mod:fn)``).
        position: the batch's source position (what the pipeline commits as its checkpoint).
        after: the position the batch starts after (None for the first batch).
        end_instant: table sources: the source table's instant the batch ends at.
        source_ends: the positions the pipeline's secondary table sources were read at, by name.
    """

    spark: SparkSession
    pipeline: str
    step: str
    position: Any
    after: Any
    end_instant: str | None
    source_ends: Mapping[str, str | None]
    views: ViewSet = field(repr=False)

    def view(self, name: str) -> DataFrame:
        """A view by name (``source``, ``target``, ``previous``, a secondary source's name...)."""
        return self.views.get(name)


def run_steps(steps: Sequence[TransformStep], views: ViewSet, context: Callable[[str], TransformContext],
              functions: Mapping[int, Callable[..., Any]], spark: SparkSession) -> DataFrame:
    """Run ``steps`` in order and return the last one's output.

    Args:
        steps: the steps.
        views: the batch's views (``previous`` is added as the steps run).
        context: builds a Python step's context from its label.
        functions: the Python steps' functions by step index (loaded at pipeline load).
        spark: the session SQL steps run in.

    Raises:
        TransformError: a step failed; the message names it.
    """
    previous: DataFrame | None = None
    suffix = f"{os.getpid()}_{id(views) % 10**8}"
    for n, step in enumerate(steps):
        label = step_label(n, step)
        try:
            if isinstance(step, SqlStep):
                out = _run_sql(step.sql, views, spark, f"{n}_{suffix}")
            else:
                df_in = previous if previous is not None else views.get("source")
                out = functions[n](df_in, context(label))
                if not isinstance(out, DataFrame):
                    raise TransformError(f"{label}: returned {type(out).__name__}, not a Spark DataFrame")
            if step.persist:  # adaptive execution runs the step's shuffle stages here: a failure there is the step's
                out = views.keep(out)
        except TransformError:
            raise
        except Exception as e:  # any failure of the user's step: name the step, keep the cause
            raise TransformError(f"{label}: {type(e).__name__}: {_first_line(e)}") from e
        logger.debug("%s done", label)
        previous = out
        views.put("previous", out)
    assert previous is not None
    return previous


def _run_sql(sql: str, views: ViewSet, spark: SparkSession, suffix: str) -> DataFrame:
    names = {name: views.sql_name(name, spark, suffix) for name in dict.fromkeys(placeholders(sql))}
    return spark.sql(substitute(sql, names))


def _same(df: DataFrame) -> DataFrame:
    return df


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else repr(e)
