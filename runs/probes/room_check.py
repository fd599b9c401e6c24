"""A workshop room checked on a GPU, through what a participant's browser uses (issue 43).

    python runs/probes/room_check.py --edition _build/workshop --into /tmp/room --seats 3 --limit 16G \
        --out runs/probes/room_check_h100.json

starts ``python -m booktools.mps --limit LIMIT -- python -m booktools.room ...`` (``--no-mps``: the room alone,
for a machine without a GPU, where the GPU steps are skipped), then talks to each seat's Jupyter server as
JupyterLab does: its REST API (``/api/kernels``, ``/api/sessions``) and a kernel's websocket channel. It records,
for the teachers' page:

- each seat's first kernel, and the free and total GPU memory that kernel sees (its MPS share);
- a second kernel asked of seat 1, by ``POST /api/kernels`` and by opening a second notebook (``POST
  /api/sessions``, what JupyterLab sends): the status and message a participant's JupyterLab receives;
- seat 2's token used on seat 1's server: listing and shutting down seat 1's kernel;
- seat 1 asking for more GPU memory than its share, then seat 2 computing right after;
- a notebook's kernel changed (``PATCH /api/sessions``, what Kernel > Change Kernel sends): refused too;
- seat 1's kernel shut down and a new one started (the refusal lifts), and with ``--check-cull`` left idle until
  the server culls it (``--cull-after``);
- Ctrl-C to the room: how long until every server and MPS stopped, and what was left.

Every step's result is written to ``--out`` (JSON) and printed one line each. MPS is stopped on every path.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from booktools.runs import limit_bytes  # run from the repository root, as the room is

SHARE = "import cupy\nfree, total = cupy.cuda.runtime.memGetInfo()\nprint(f'{free / 2**30:.2f} {total / 2**30:.2f}')"
OVER_ASK = (
    "import cupy\ntry:\n    block = cupy.empty(int({gib} * 2**30), dtype='u1')\n    print('allocated')\n"
    "except cupy.cuda.memory.OutOfMemoryError as error:\n    print('refused:', type(error).__name__)"
)
WORK = "import cupy\nprint(float(cupy.arange(10**6, dtype=cupy.float64).sum()))"


def api(port: int, token: str, method: str, path: str, body=None) -> tuple[int, object]:
    """One REST call to a seat's server: (HTTP status, the JSON body or the error's message)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            text = answer.read()
            return answer.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        text = error.read().decode(errors="replace")
        try:
            return error.code, json.loads(text).get("message", text)
        except ValueError:
            return error.code, text[:500]


def run_code(port: int, token: str, kernel: str, code: str, timeout: float = 180) -> dict:
    """Run ``code`` in a seat's kernel through its websocket channel, as JupyterLab does: its printed text and
    error."""
    import websocket  # noqa: PLC0415  # websocket-client, which jupyter_server needs: on the GPU host only

    channel = websocket.create_connection(
        f"ws://127.0.0.1:{port}/api/kernels/{kernel}/channels?token={token}", timeout=timeout
    )
    msg_id = uuid.uuid4().hex
    header = {
        "msg_id": msg_id,
        "username": "room-check",
        "session": uuid.uuid4().hex,
        "msg_type": "execute_request",
        "version": "5.3",
        "date": dt.datetime.now(dt.UTC).isoformat(),
    }
    content = {"code": code, "silent": False, "store_history": False, "user_expressions": {}, "allow_stdin": False}
    channel.send(
        json.dumps(
            {
                "header": header,
                "parent_header": {},
                "metadata": {},
                "content": content,
                "channel": "shell",
                "buffers": [],
            }
        )
    )
    printed, error, deadline = [], None, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            message = json.loads(channel.recv())
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = message["msg_type"]
            if kind == "stream":
                printed.append(message["content"]["text"])
            elif kind == "error":
                error = f"{message['content']['ename']}: {message['content']['evalue']}"
            elif kind == "status" and message["content"]["execution_state"] == "idle":
                return {"printed": "".join(printed).strip(), "error": error}
    finally:
        channel.close()
    return {"printed": "".join(printed).strip(), "error": error or f"no answer in {timeout} s"}


def wait_for_servers(into: Path, seats: int, room: subprocess.Popen, timeout: float = 120) -> dict[int, str]:
    """Each seat's port and token once every server answers ``/api/status``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if room.poll() is not None:
            raise RuntimeError(f"the room stopped (exit {room.returncode}) before its servers answered")
        tokens_file = into / "tokens.json"
        if tokens_file.is_file():
            tokens = json.loads(tokens_file.read_text())
            ports = {}
            for seat in range(1, seats + 1):
                name = f"seat-{seat}"
                ports[PORT0 + seat - 1] = tokens[name] if isinstance(tokens, dict) and name in tokens else None
            if all(ports.values()) and all(_answers(port, token) for port, token in ports.items()):
                return ports
        time.sleep(1)
    raise RuntimeError(f"the servers did not answer within {timeout} s")


def _answers(port: int, token: str) -> bool:
    try:
        return api(port, token, "GET", "/api/status")[0] == 200
    except OSError:
        return False


def stop_room(room: subprocess.Popen, grace: float = 90) -> dict:
    """Ctrl-C to the room's process group, as a teacher's terminal sends it; how long until it exited."""
    start = time.monotonic()
    try:
        os.killpg(room.pid, signal.SIGINT)
    except ProcessLookupError:
        pass
    try:
        room.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(room.pid, signal.SIGKILL)
        room.wait()
    return {"exit": room.returncode, "seconds": round(time.monotonic() - start, 1)}


def left_running(pattern: str) -> list[str]:
    """Processes whose command line holds ``pattern`` (not this one's ``ps``)."""
    listing = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=False).stdout
    return [line.strip() for line in listing.splitlines()[1:] if pattern in line and "room_check" not in line]


PORT0 = 8801


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edition", type=Path, required=True)
    parser.add_argument("--into", type=Path, required=True)
    parser.add_argument("--seats", type=int, default=3)
    parser.add_argument("--limit", default="16G")
    parser.add_argument("--over-ask", type=float, default=20.0, help="GiB seat 1 asks for, above its share")
    parser.add_argument("--no-mps", action="store_true", help="the room alone: no MPS, no GPU steps")
    parser.add_argument("--cull-after", type=int, default=600, help="the room's --cull-after, in seconds")
    parser.add_argument("--check-cull", action="store_true", help="wait for an idle kernel to be culled")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.seats < 2:
        parser.error("the checks need two seats at least")
    room_command = [
        sys.executable,
        "-m",
        "booktools.room",
        "--edition",
        str(args.edition),
        "--seats",
        str(args.seats),
        "--into",
        str(args.into),
        "--first-port",
        str(PORT0),
        "--cull-after",
        str(args.cull_after),
    ]
    if os.geteuid() == 0:  # a lab host's only account: the room refuses root unless told (booktools.room)
        room_command.append("--allow-root")
    environment = dict(os.environ)
    import jupyterlab  # noqa: PLC0415  # where it is: a --target install keeps its assets beside it

    assets = Path(jupyterlab.__file__).parents[1] / "share" / "jupyter" / "lab"
    if assets.is_dir():
        environment.setdefault("JUPYTERLAB_DIR", str(assets))
    if not args.no_mps:
        room_command = [sys.executable, "-m", "booktools.mps", "--limit", args.limit, "--", *room_command]
    args.into.parent.mkdir(parents=True, exist_ok=True)
    log_path = args.into.parent / f"{args.into.name}-room.out"  # holds room.md's addresses: this account's only
    log = os.fdopen(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w")
    started = time.monotonic()
    room = subprocess.Popen(room_command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=environment)
    record: dict = {"command": " ".join(room_command[1:]), "steps": []}

    def step(name: str, expected: bool, **result) -> None:
        """One step's result, and whether it is what the teachers' page says the room does."""
        record["steps"].append({"step": name, "as expected": bool(expected), **result})
        mark = "ok" if expected else "UNEXPECTED"
        print(f"{mark} {name}: {json.dumps(result, ensure_ascii=False)[:400]}", flush=True)

    refused = "One kernel per seat"
    try:
        ports = wait_for_servers(args.into, args.seats, room)
        step(
            "servers answering",
            len(ports) == args.seats,
            seats=len(ports),
            seconds=round(time.monotonic() - started, 1),
        )
        (port1, token1), (port2, token2) = list(ports.items())[:2]
        kernels = {}
        for port, token in ports.items():
            status, body = api(port, token, "POST", "/api/kernels", {"name": "python3"})
            kernels[port] = body.get("id") if isinstance(body, dict) else None
            step(f"first kernel, port {port}", status == 201, status=status)
        status, message = api(port1, token1, "POST", "/api/kernels", {"name": "python3"})
        step(
            "second kernel, seat 1, POST /api/kernels",
            status == 403 and refused in str(message),
            status=status,
            message=message,
        )
        notebooks = sorted(p.name for p in args.edition.glob("*.ipynb"))
        session = {"path": notebooks[-1], "type": "notebook", "name": notebooks[-1], "kernel": {"name": "python3"}}
        status, message = api(port1, token1, "POST", "/api/sessions", session)
        step(
            f"second notebook opened, seat 1, POST /api/sessions ({notebooks[-1]})",
            status == 500 and refused in str(message),
            status=status,
            message=message,
        )
        status, message = api(port1, "", "GET", "/api/kernels")
        step("no token on seat 1's server: list kernels", status == 403, status=status, message=message)
        status, message = api(port1, token2, "GET", "/api/kernels")
        step("seat 2's token on seat 1's server: list kernels", status == 403, status=status, message=message)
        status, message = api(port1, token2, "DELETE", f"/api/kernels/{kernels[port1]}")
        step(
            "seat 2's token on seat 1's server: shut down seat 1's kernel (refused as a request without a "
            "token of this server: it asks for its XSRF cookie)",
            status == 403,
            status=status,
            message=message,
        )
        alive = api(port1, token1, "GET", f"/api/kernels/{kernels[port1]}")[0]
        step("seat 1's kernel after that", alive == 200, status=alive)
        if not args.no_mps:
            for port, token in ports.items():
                seen = run_code(port, token, kernels[port], SHARE)
                free = float(seen["printed"].split()[0]) if seen["error"] is None and seen["printed"] else None
                share = limit_bytes(args.limit) / 2**30  # GiB, as booktools.mps reads the limit
                step(f"GPU memory seen (free, total GiB), port {port}", free is not None and free <= share, **seen)
            over = run_code(port1, token1, kernels[port1], OVER_ASK.format(gib=args.over_ask))
            step(f"seat 1 asks for {args.over_ask:g} GiB", over["printed"].startswith("refused"), **over)
            work = run_code(port2, token2, kernels[port2], WORK)
            step("seat 2 computes right after", work["error"] is None and work["printed"] != "", **work)
        # changing a notebook's kernel (what Kernel > Change Kernel sends): the new kernel would be a second one
        api(port2, token2, "DELETE", f"/api/kernels/{kernels[port2]}")
        status, body = api(
            port2, token2, "POST", "/api/sessions", {**session, "path": notebooks[0], "name": notebooks[0]}
        )
        step(f"seat 2 opens {notebooks[0]}", status == 201, status=status)
        if status == 201:
            change = {"kernel": {"name": "python3"}}
            status, message = api(port2, token2, "PATCH", f"/api/sessions/{body['id']}", change)
            step(
                "seat 2 changes that notebook's kernel, PATCH /api/sessions",
                status in (403, 500, 501) and refused in str(message),
                status=status,
                message=message,
            )
        status, _ = api(port1, token1, "DELETE", f"/api/kernels/{kernels[port1]}")
        step("seat 1 shuts its kernel down", status == 204, status=status)
        status, body = api(port1, token1, "POST", "/api/kernels", {"name": "python3"})
        step("seat 1 starts a kernel again", status == 201, status=status)
        if args.check_cull and status == 201:  # left idle, the server shuts it down after --cull-after
            waited, deadline = time.monotonic(), time.monotonic() + args.cull_after + 150
            while time.monotonic() < deadline and api(port1, token1, "GET", f"/api/kernels/{body['id']}")[0] == 200:
                time.sleep(5)
            gone = api(port1, token1, "GET", f"/api/kernels/{body['id']}")[0]
            step(
                f"seat 1's idle kernel, culled after {args.cull_after} s",
                gone == 404,
                status=gone,
                seconds=round(time.monotonic() - waited),
            )
    except Exception as error:  # noqa: BLE001  # record it, then stop the room all the same
        step("error", False, message=f"{type(error).__name__}: {error}")
    finally:
        stopped = stop_room(room)
        time.sleep(2)
        servers_left = left_running(f"--ServerApp.root_dir={args.into.resolve()}/")
        mps_left = left_running("nvidia-cuda-mps")
        expected_exit = (0, -signal.SIGINT) if args.no_mps else (-signal.SIGINT,)  # mps ends as Ctrl-C killed it
        step(
            "Ctrl-C to the room",
            stopped["exit"] in expected_exit and not servers_left and not mps_left,
            **stopped,
            servers_left=servers_left,
            mps_left=mps_left,
        )
        if left_running("nvidia-cuda-mps-control -d") or left_running("nvidia-cuda-mps-server"):
            subprocess.run(["bash", "-c", "echo quit | timeout 10 nvidia-cuda-mps-control"], check=False)
        log.close()
        room_log = log_path.read_text(errors="replace")[-4000:]
        record["room_log"] = re.sub(r"token=[\w-]+", "token=(redacted)", room_log)  # room.md's addresses
        args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    unexpected = [step["step"] for step in record["steps"] if not step["as expected"]]
    print("every step as expected" if not unexpected else f"UNEXPECTED: {unexpected}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
