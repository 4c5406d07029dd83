"""How a verdict or a severity reads on screen: a word that says it without colour, and a
colour only where it means something (green ok, yellow warning, red error)."""

from __future__ import annotations

from rich.text import Text

OK, WARNING, ERROR = "green", "yellow", "bold red"

SEVERITY_STYLE = {"error": ERROR, "warning": WARNING, "info": ""}


def verdict_text(verdict: str) -> Text:
    """``GROWING`` / ``ACCELERATING`` in capitals (alarming without colour too)."""
    # imported here: statekit.growth.trend brings numpy, which the first screen does not need
    from statekit.growth.trend import ACCELERATING, BOUNDED, GROWING

    alarming = verdict in (GROWING, ACCELERATING)
    return Text(verdict.upper() if alarming else verdict,
                style=ERROR if alarming else OK if verdict == BOUNDED else WARNING)


def severity_text(severity: str) -> Text:
    return Text(severity.upper() if severity == "error" else severity,
                style=SEVERITY_STYLE.get(severity, ""))
