"""`kvtune proxy`: Optuna's gRPC storage proxy in front of the study's database, for workers on
many hosts (`--storage grpc://HOST:PORT`); see tuner/store/storage_proxy.py for what it adds."""

from __future__ import annotations

import signal
import threading

import typer

from kvtune.cli.app import app, console, say_wait
from kvtune.cli.flag_values import listen_host
from kvtune.commands import STORAGE_ENV
from kvtune.errors import SpecError


@app.command()
def proxy(
    storage: str = typer.Option(
        ...,
        envvar=STORAGE_ENV,
        help="The study's database, e.g. postgresql://user:pw@db/kvtune; or set KVTUNE_STORAGE (its password "
        "then stays out of the proxy's command line, which every user of the host can read).",
    ),
    host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0: every interface, for other hosts)."),
    port: int = typer.Option(13000, help="Port to listen on."),
) -> None:
    """Serve the study's database to workers over gRPC until Ctrl-C or SIGTERM; workers and
    `kvtune run` take `--storage grpc://THIS-HOST:PORT`."""
    from kvtune.tuner.store.storage import redact
    from kvtune.tuner.store.storage_proxy import StorageProxy

    if not 0 < port < 65536:
        raise SpecError(f"--port must be in 1..65535, got {port}")
    listen_host(host)
    server = StorageProxy(storage, host, port, on_wait=say_wait)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    console.print(
        f"storage proxy for {redact(storage)} on {host}:{port}: workers take --storage grpc://HOST:{port} "
        f"(no TLS, no authentication: keep the port on a private network)",
        markup=False,
        soft_wrap=True,
    )
    while not stop.wait(1.0):
        pass
    server.stop()
    console.print("storage proxy stopped", markup=False)
