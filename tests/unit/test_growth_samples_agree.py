"""A growth page never contradicts itself: its verdict, each store's and the evidence agree.

``test_doc_samples.py`` checks that the docs' samples are what the commands print; this
checks that what they print is one story. Each growth sample is read as a reader would:
the page's verdict, each store's verdict with its keys' and values' parts, each progress-log
section (which must say whether it agrees with the state files, and whose verdict stands
where it does not), and the evidence under each (a store whose keys "saturate" has the
keys' verdict ``saturating``; a leak is ``growing``). The check is run on a page that does
contradict itself (the leaky sample as an earlier statekit printed it) to show it would fail.
"""

from __future__ import annotations

import re

import pytest

from statekit.growth.trend import severity
from tests.support.scripts import load_script

make_samples = load_script("docs/make_samples.py")

PAGE_VERDICT = re.compile(r"^verdict: ([A-Z-]+)$", re.MULTILINE)
STORE = re.compile(r"^(operator .+?) ([A-Z-]+) \(keys ([a-z-]+)(?:, values ([a-z-]+))?\) · ")
PROGRESS = re.compile(r"^progress log (\S+) ([A-Z-]+) · .*?(· agrees with the state files|"
                      r"· (?:the state files'|this log's) verdict ([A-Z-]+) stands.*)?$")
EVIDENCE_SAYS = {
    "The key count saturates": {"saturating"},
    "Leak:": {"growing", "accelerating"},
    "Too early to tell": {"insufficient-history"},
}


def contradictions(page: str) -> list[str]:
    """Every place the page disagrees with itself (empty: one story)."""
    found = []
    verdicts = PAGE_VERDICT.findall(page)
    standing: list[str] = []
    section: tuple[str, str] | None = None  # (what, the keys' verdict its evidence must fit)
    plateau_bytes = set()
    for line in page.splitlines():
        if (store := STORE.match(line)) is not None:
            label, verdict, keys, values = store.groups()
            parts = [keys] + ([values] if values else [])
            if verdict.lower() != max(parts, key=severity):
                found.append(f"{label}: {verdict} is not the worse of keys {keys} and values "
                             f"{values}")
            standing.append(verdict.lower())
            section = (label, keys)
        elif (progress := PROGRESS.match(line)) is not None:
            label, verdict, judged, stands = progress.groups()
            if judged is None and standing:
                found.append(f"progress log {label}: {verdict} beside the state files' "
                             "verdicts, saying neither that it agrees nor whose stands")
            if judged and judged.startswith("· agrees") and verdict.lower() not in standing:
                found.append(f"progress log {label}: says it agrees but is {verdict}")
            standing.append((stands or verdict).lower())
            # a log's verdict may be its memory per key's: only its keys' words are checked
            section = (f"progress log {label}", "" if "Memory per key rises" in page
                       else verdict.lower())
        elif line.startswith("  • ") and section is not None:
            for words, allowed in EVIDENCE_SAYS.items():
                if words in line and section[1] and section[1] not in allowed:
                    found.append(f"{section[0]}: the evidence says {words!r} but the keys' "
                                 f"verdict is {section[1]}")
        if (size := re.search(r"State at the plateau ≈ ([\d,]+) B", line)) is not None:
            plateau_bytes.add(size.group(1))
    if len(verdicts) != 1:
        found.append(f"{len(verdicts)} page verdicts")
    elif standing and verdicts[0].lower() != max(standing, key=severity):
        found.append(f"the page says {verdicts[0]}, its sections {sorted(set(standing))}")
    if len(plateau_bytes) > 1:
        found.append(f"two sizes at the plateau: {sorted(plateau_bytes)}")
    return found


GROWTH_SAMPLES = [s.name for s in make_samples.SAMPLE_LIST if s.command.startswith(
    "statekit growth")]


def test_there_are_growth_samples_to_check():
    assert {"growth", "growth-leaky"} <= set(GROWTH_SAMPLES)


@pytest.mark.parametrize("name", GROWTH_SAMPLES)
def test_a_growth_sample_tells_one_story(name):
    page = (make_samples.SAMPLES / f"{name}.txt").read_text()
    assert STORE.search(page) or "progress log" in page, "no store or log section parsed"
    assert contradictions(page) == []


EARLIER_LEAKY_PAGE = """\
verdict: ACCELERATING
State grows in operator 0 (applyInPandasWithState) (accelerating).

operator 0 (applyInPandasWithState) ACCELERATING (keys saturating, values accelerating) · replay
  • The key count saturates: the share of new keys per batch falls from 64% to 11%.
  • State at the plateau ≈ 523,047 B (214 B per key now).

progress log 0:applyInPandasWithState SATURATING · 24 batches · rows ▁▁▂▃
  • The key count saturates: the share of new keys per batch falls from 64% to 11%.
  • State at the plateau ≈ 958,007 B (393 B per key now).
"""


def test_a_page_that_contradicts_itself_is_caught():
    """What statekit printed before one verdict per operator: the progress log's SATURATING
    beside the state files' ACCELERATING with no word on which stands, and two sizes."""
    found = contradictions(EARLIER_LEAKY_PAGE)
    assert any("saying neither" in f for f in found)
    assert any("two sizes at the plateau" in f for f in found)
    wrong_parts = EARLIER_LEAKY_PAGE.replace("(keys saturating, values accelerating)",
                                             "(keys saturating)")
    assert any("is not the worse" in f for f in contradictions(wrong_parts))
    leak_but_saturating = EARLIER_LEAKY_PAGE.replace(
        "The key count saturates", "Leak: new keys no finite population explains", 1)
    assert any("'Leak:'" in f for f in contradictions(leak_but_saturating))
