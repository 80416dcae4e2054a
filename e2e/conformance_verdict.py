"""One line for a conformance scenario's results (e2e/conformance.sh).

usage: conformance_verdict.py SCENARIO OUTPUT_DIR LOG

PASS when every check succeeded. FIXTURE when checks were not met and the scenario
called a tool or prompt of the suite's own test server (`test_*`) that MCC's fixed
surface does not have: reported, never fixed by adding it. FAIL (exit 1) otherwise,
warnings included: the issue asks for no warning our own behaviour causes.
"""

import glob
import json
import re
import sys

FIXTURE = re.compile(r"Unknown (?:tool|prompt): (test_\w+)|(?:tool|prompt) '?(test_\w+)'? not found")


def main() -> int:
    scenario, out, log = sys.argv[1:4]
    checks = []
    for path in sorted(glob.glob(f"{out}/**/checks.json", recursive=True)):
        with open(path) as f:
            checks += json.load(f)
    if not checks:
        with open(log, errors="replace") as f:
            tail = f.read()[-400:].replace("\n", " ")
        print(f"FAIL     {scenario}: no results ({tail})")
        return 1
    unmet = [c for c in checks if c["status"] not in ("SUCCESS", "INFO")]
    if not unmet:
        print(f"PASS     {scenario} ({len(checks)} checks)")
        return 0
    fixtures = sorted(
        {name for m in FIXTURE.finditer(json.dumps(checks)) for name in m.groups() if name}
    )
    detail = "; ".join(
        f"{c['status']} {c['id']}: {c.get('errorMessage', '')}".strip() for c in unmet
    )
    if fixtures:
        print(
            f"FIXTURE  {scenario}: calls the suite's own {', '.join(fixtures)}, which MCC's "
            f"surface does not have (not added); unmet: {detail}"
        )
        return 0
    print(f"FAIL     {scenario}: {detail}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
