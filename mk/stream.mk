# The streams (src/stream/: pod logs, exec over WebSocket). tests/integration/test_stream.c drives
# exec with Debian's python3-websocket (a WebSocket client no one here wrote), through
# /usr/bin/python3 (../shared/STYLE.md: the python3 first on PATH lacks Debian's modules).
DEB_PKGS += python3-websocket
