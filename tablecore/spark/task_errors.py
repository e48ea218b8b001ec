"""Errors of Spark tasks reported as themselves: a task's :class:`~tablecore.exceptions.TableCorruptError` reaches
the driver as Spark's ``PythonException`` or ``Py4JJavaError`` holding the task's traceback; the engine's jobs run
inside :func:`task_errors`, which raises it as the error it is."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tablecore.exceptions import TableCoreError, corrupt_error_in


@contextmanager
def task_errors() -> Iterator[None]:
    """Raise a :class:`~tablecore.exceptions.TableCorruptError` a task raised as itself, not as Spark's wrapper
    (``PythonException``, ``Py4JJavaError``) of the task's traceback."""
    try:
        yield
    except TableCoreError:
        raise
    except Exception as exc:
        corrupt = corrupt_error_in(exc)
        if corrupt is None:
            raise
        raise corrupt from exc
