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
- seat 1's kernel shut down and a new one started (the refusal lifts);
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
        "600",
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
    log = open(args.into.parent / f"{args.into.name}-room.out", "w")  # noqa: SIM115  # closed at the end
    started = time.monotonic()
    room = subprocess.Popen(room_command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=environment)
    record: dict = {"command": " ".join(room_command[1:]), "steps": []}

    def step(name: str, **result) -> None:
        record["steps"].append({"step": name, **result})
        print(f"{name}: {json.dumps(result, ensure_ascii=False)[:400]}", flush=True)

    try:
        ports = wait_for_servers(args.into, args.seats, room)
        step("servers answering", seats=len(ports), seconds=round(time.monotonic() - started, 1))
        (port1, token1), (port2, token2) = list(ports.items())[:2]
        kernels = {}
        for port, token in ports.items():
            status, body = api(port, token, "POST", "/api/kernels", {"name": "python3"})
            kernels[port] = body.get("id") if isinstance(body, dict) else None
            step(f"first kernel, port {port}", status=status)
        status, message = api(port1, token1, "POST", "/api/kernels", {"name": "python3"})
        step("second kernel, seat 1, POST /api/kernels", status=status, message=message)
        notebook = sorted(p.name for p in args.edition.glob("*.ipynb"))[-1]
        session = {"path": notebook, "type": "notebook", "name": notebook, "kernel": {"name": "python3"}}
        status, message = api(port1, token1, "POST", "/api/sessions", session)
        step(f"second notebook opened, seat 1, POST /api/sessions ({notebook})", status=status, message=message)
        status, message = api(port1, token2, "GET", "/api/kernels")
        step("seat 2's token on seat 1's server: list kernels", status=status, message=message)
        status, message = api(port1, token2, "DELETE", f"/api/kernels/{kernels[port1]}")
        step("seat 2's token on seat 1's server: shut down seat 1's kernel", status=status, message=message)
        alive = api(port1, token1, "GET", f"/api/kernels/{kernels[port1]}")[0]
        step("seat 1's kernel after that", status=alive)
        if not args.no_mps:
            for port, token in ports.items():
                step(f"GPU memory seen (free, total GiB), port {port}", **run_code(port, token, kernels[port], SHARE))
            step(
                f"seat 1 asks for {args.over_ask:g} GiB",
                **run_code(port1, token1, kernels[port1], OVER_ASK.format(gib=args.over_ask)),
            )
            step("seat 2 computes right after", **run_code(port2, token2, kernels[port2], WORK))
        status, _ = api(port1, token1, "DELETE", f"/api/kernels/{kernels[port1]}")
        step("seat 1 shuts its kernel down", status=status)
        status, body = api(port1, token1, "POST", "/api/kernels", {"name": "python3"})
        step("seat 1 starts a kernel again", status=status)
    except Exception as error:  # noqa: BLE001  # record it, then stop the room all the same
        step("error", message=f"{type(error).__name__}: {error}")
    finally:
        stopped = stop_room(room)
        time.sleep(2)
        step(
            "Ctrl-C to the room",
            **stopped,
            jupyter_left=left_running("jupyterlab"),
            mps_left=left_running("nvidia-cuda-mps"),
        )
        if left_running("nvidia-cuda-mps-control -d") or left_running("nvidia-cuda-mps-server"):
            subprocess.run(["bash", "-c", "echo quit | timeout 10 nvidia-cuda-mps-control"], check=False)
        log.close()
        room_log = (args.into.parent / f"{args.into.name}-room.out").read_text(errors="replace")[-4000:]
        record["room_log"] = re.sub(r"token=[\w-]+", "token=(redacted)", room_log)  # room.md's addresses
        args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return 0 if all(s["step"] != "error" for s in record["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
