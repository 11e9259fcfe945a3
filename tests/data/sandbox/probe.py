"""The hostile program agent of tests/e2e/test_sandbox.py (one turn): what it can see and do."""

import glob
import json
import os
import sys
import urllib.request

KEY = "@KEY@"  # the test fills these in: the gateway key to look for, a host path outside the workspace
OUTSIDE = "@OUTSIDE@"

found = []
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        with open(path, "rb") as fh:
            if KEY.encode() in fh.read():
                found.append(path)
    except OSError:
        pass
try:
    with open(OUTSIDE, "w") as fh:
        fh.write("escaped")
    wrote = "written"
except OSError as exc:
    wrote = type(exc).__name__
try:
    with open(__file__, "a") as fh:  # a host file it can read: bound read-only
        fh.write("# changed")
    changed = "written"
except OSError as exc:
    changed = type(exc).__name__
with open("inside.txt", "w") as fh:
    fh.write("mine")
body = {"model": "sim-agent-y", "messages": [{"role": "user", "content": sys.argv[1]}], "max_tokens": 200}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps(body).encode(),
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"},
)
with urllib.request.urlopen(request, timeout=60) as response:
    status = response.status
    reply = json.loads(response.read())["choices"][0]["message"]["content"]
seen = {
    "key_in": found,
    "processes": len(glob.glob("/proc/[0-9]*")),
    "outside": wrote,
    "own_script": changed,
    "status": status,
    "cwd": os.getcwd(),
    "home": os.environ.get("HOME"),
    "env": sorted(os.environ),
}
with open(os.path.join(os.environ["HOME"], "probe.json"), "w") as fh:
    json.dump(seen, fh)
print(json.dumps({"reply": reply}))
