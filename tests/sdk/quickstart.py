"""tests/sdk/quickstart.py: the Python quick start of README.md, run live by make sdk-test-py;
the lines between the markers are the README's (tests/sdk/readme_check.sh keeps them equal)."""
import os
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
# quickstart:begin
# make sdk-py   (writes build/sdk/python; FLEETGATE_URL and FLEETGATE_TOKEN name the server and your token)
import sys
sys.path.insert(0, "build/sdk/python")
import fleetgate_sdk as fs

fg = fs.Fleetgate(on_call=lambda c: print(c.method, c.url, c.status, "%.1f ms" % c.duration_ms, "id=" + c.request_id, file=sys.stderr))
print("hello", fg.get_whoami().data.subject)
pods = sum(1 for _ in fg.paginate(fg.list_pods, "demo", limit=100))
print("project demo runs %d pods" % pods)
try:
    fg.get_app("demo", "no-such-app")
except fs.NotFoundError as e:
    print("not found: %s (request %s)" % (e.detail, e.request_id))
# quickstart:end
