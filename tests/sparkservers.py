"""Spark servers for the tests, started from the pyspark install (nothing to start by hand): a Spark Connect server
(``org.apache.spark.sql.connect.service.SparkConnectServer`` from ``jars/spark-connect_*.jar``) and a standalone
cluster (a master and a worker, executors in JVMs of their own), all on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from tablecore.spark.session import LOG4J2_CONFIG

SPARK_HOME = Path(pyspark.__file__).parent
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(log_dir: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOG_DIR": str(log_dir), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_CONNECT_MODE": "0",
            "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[1]),
                                                      os.environ.get("PYTHONPATH", "")) if p)}


def _wait_for_port(proc: subprocess.Popen[bytes], port: int, what: str, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text(errors='replace')[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} in {timeout_s}s: {log.read_text()[-3000:]}")


def _java_options() -> str:
    return f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"


@dataclass
class SparkServers:
    """Processes to stop at the end."""

    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def stop(self) -> None:
        """Terminate every process (then kill what does not stop)."""
        for p in reversed(self.processes):
            p.terminate()
        for p in reversed(self.processes):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def start_connect_server(log_dir: Path, *, master: str = "local[2]", timeout_s: float = 120.0,
                         ) -> tuple[SparkServers, str]:
    """A Spark Connect server on a free port; returns it and its ``sc://`` URL."""
    port = free_port()
    log = log_dir / "connect.log"
    cmd = [str(SPARK_HOME / "bin" / "spark-submit"), "--class", CONNECT_CLASS, "--name", "lakegate-tests-connect",
           "--master", master,
           "--conf", f"spark.connect.grpc.binding.port={port}",
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.session.timeZone=UTC",
           "--conf", "spark.sql.shuffle.partitions=4", "--conf", "spark.default.parallelism=2",
           "--conf", "spark.python.worker.reuse=true", "--conf", "spark.driver.memory=2g",
           "--conf", f"spark.driver.extraJavaOptions={_java_options()}",
           "--conf", f"spark.executor.extraJavaOptions={_java_options()}",
           "--conf", f"spark.pyspark.python={sys.executable}"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(log_dir))
    servers = SparkServers([proc])
    try:
        _wait_for_port(proc, port, "the Spark Connect server", log, timeout_s)
    except BaseException:
        servers.stop()
        raise
    return servers, f"sc://127.0.0.1:{port}"


def start_standalone_cluster(log_dir: Path, *, cores: int = 2, memory: str = "2g", timeout_s: float = 120.0,
                             ) -> tuple[SparkServers, str]:
    """A standalone master and one worker (``spark-class`` from the pyspark install); returns them and the
    ``spark://`` master URL."""
    port, ui = free_port(), free_port()
    servers = SparkServers()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    env = _env(log_dir)  # master and worker log at INFO into their files: the worker says when it registered
    try:
        master_log = log_dir / "master.log"
        with open(master_log, "wb") as out:
            master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                       "--port", str(port), "--webui-port", str(ui)],
                                      stdout=out, stderr=subprocess.STDOUT, env=env)
        servers.processes.append(master)
        _wait_for_port(master, port, "the standalone master", master_log, timeout_s)
        url = f"spark://127.0.0.1:{port}"
        worker_log = log_dir / "worker.log"
        with open(worker_log, "wb") as out:
            worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                       "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                                       "--work-dir", str(log_dir / "work"), url],
                                      stdout=out, stderr=subprocess.STDOUT, env=env)
        servers.processes.append(worker)
        deadline = time.monotonic() + timeout_s
        while b"Successfully registered with master" not in worker_log.read_bytes():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the standalone worker did not register: {worker_log.read_text()[-3000:]}")
            time.sleep(0.2)
    except BaseException:
        servers.stop()
        raise
    return servers, url
