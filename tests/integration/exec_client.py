#!/usr/bin/python3
"""A WebSocket client nobody here wrote (Debian's python3-websocket) driving exec through
fleetgate: tests/integration/test_exec.c runs it. Usage:
  exec_client.py URL TOKEN PROTOCOL MODE
TOKEN "subprotocol:T" sends T as a browser does (no Authorization header; one more offered
subprotocol base64url.bearer.authorization.k8s.io.<T in base64url>); "subprotocol-raw:S" offers
base64url.bearer.authorization.k8s.io.S as given.
MODE: exit3   run `sh -c 'echo hi; echo err >&2; exit 3'`: stdout hi, stderr err, exit code 3
      stdin   run `cat` with stdin: what is sent comes back; [255,0] (v5) or a close ends it
      resize  run `sh` with a tty; resize to 100x30 and ask `stty size`
      hold    run `sleep 30`, print "open", wait for a line on stdin, then close the socket
Prints one line "ok ..." on success, exits 1 otherwise."""
import base64
import json
import ssl
import sys
import time
import urllib.parse

import websocket


def connect(url, token, protocol, command, params):
    q = [("command", c) for c in command] + list(params.items())
    header, protocols = ["Authorization: Bearer " + token], [protocol]
    bearer = "base64url.bearer.authorization.k8s.io."
    if token.startswith("subprotocol:"):
        t = base64.urlsafe_b64encode(token[len("subprotocol:"):].encode()).decode().rstrip("=")
        header, protocols = [], [protocol, bearer + t]
    elif token.startswith("subprotocol-raw:"):
        header, protocols = [], [protocol, bearer + token[len("subprotocol-raw:"):]]
    ws = websocket.create_connection(
        url + "?" + urllib.parse.urlencode(q),
        header=header,
        subprotocols=protocols,
        sslopt={"cert_reqs": ssl.CERT_NONE},
        timeout=10,
    )
    if ws.getsubprotocol() != protocol:
        raise SystemExit("subprotocol %r, want %r" % (ws.getsubprotocol(), protocol))
    return ws


def collect(ws):
    """Reads frames until the socket closes: the bytes of channels 1 and 2, the status."""
    out, err, status = b"", b"", None
    while True:
        try:
            op, data = ws.recv_data(control_frame=False)
        except websocket.WebSocketConnectionClosedException:
            break
        if op == websocket.ABNF.OPCODE_CLOSE:
            break
        if not data:
            continue
        ch, payload = data[0], data[1:]
        if ch == 1:
            out += payload
        elif ch == 2:
            err += payload
        elif ch == 3:
            status = json.loads(payload)
    return out, err, status


def exit_code(status):
    if status is None:
        return None
    if status.get("status") == "Success":
        return 0
    for c in status.get("details", {}).get("causes", []):
        if c.get("reason") == "ExitCode":
            return int(c["message"])
    return None


def main():
    url, token, protocol, mode = sys.argv[1:5]
    io = {"stdout": "true", "stderr": "true"}
    if mode == "exit3":
        ws = connect(url, token, protocol, ["sh", "-c", "echo hi; echo err >&2; exit 3"], io)
        out, err, status = collect(ws)
        if out != b"hi\n" or err != b"err\n" or exit_code(status) != 3:
            raise SystemExit("exit3: out %r err %r status %r" % (out, err, status))
        print("ok exit3")
    elif mode == "stdin":
        ws = connect(url, token, protocol, ["cat"], dict(io, stdin="true"))
        ws.send_binary(b"\x00hello fleetgate\n")
        got = b""
        deadline = time.time() + 5
        while b"hello fleetgate\n" not in got and time.time() < deadline:
            op, data = ws.recv_data()
            if data and data[0] == 1:
                got += data[1:]
        if protocol.startswith("v5"):
            ws.send_binary(b"\xff\x00")  # CLOSE stdin: cat ends, status follows
            out, err, status = collect(ws)
            if exit_code(status) != 0:
                raise SystemExit("stdin: status %r" % (status,))
        else:
            ws.close()
        if b"hello fleetgate\n" not in got:
            raise SystemExit("stdin: got %r" % got)
        print("ok stdin")
    elif mode == "resize":
        ws = connect(url, token, protocol, ["sh", "-c", "sleep 0.3; stty size"],
                     {"stdout": "true", "tty": "true", "stdin": "true"})
        ws.send_binary(b"\x04" + json.dumps({"Width": 100, "Height": 30}).encode())
        out, err, status = collect(ws)
        if b"30 100" not in out or exit_code(status) != 0:
            raise SystemExit("resize: out %r status %r" % (out, status))
        print("ok resize")
    elif mode == "hold":
        ws = connect(url, token, protocol, ["sleep", "30"], io)
        print("open", flush=True)
        sys.stdin.readline()
        ws.sock.close()  # no close frame: the client just goes
        print("ok hold")
    else:
        raise SystemExit("unknown mode " + mode)


main()
