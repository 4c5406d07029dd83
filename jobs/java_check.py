"""Fail early, in one line, when the machine lacks the Java that Spark needs.

Spark 4 runs on Java 17 or newer. Without this check a missing JVM surfaces much later as
py4j's "Java gateway process exited before sending its port number", which tells nobody
what to install. Stdlib only: it runs before the virtual environment exists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

REQUIRED_MAJOR = 17


def java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def java_major(version_output: str) -> int | None:
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not match:
        return None
    major = int(match.group(1))
    # Java 8 and older report "1.8.0_x".
    return int(match.group(2)) if major == 1 and match.group(2) else major


def java_problem() -> str | None:
    """Return a one-line description of what is wrong with the machine's Java, or None."""
    java = java_executable()
    if java is None:
        return (
            f"Java {REQUIRED_MAJOR}+ is required by Spark but no `java` was found "
            "(set JAVA_HOME or install e.g. openjdk-17-jre-headless)"
        )
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    except OSError as exc:
        return f"Java {REQUIRED_MAJOR}+ is required by Spark; running {java} failed: {exc}"
    major = java_major(proc.stderr + proc.stdout)
    if major is None or major < REQUIRED_MAJOR:
        lines = (proc.stderr or proc.stdout).splitlines()
        found = lines[0] if lines else "no version"
        return (
            f"Java {REQUIRED_MAJOR}+ is required by Spark; {java} reports {found} "
            f"(set JAVA_HOME to a JDK {REQUIRED_MAJOR}+)"
        )
    return None


def main() -> int:
    problem = java_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
