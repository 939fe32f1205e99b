"""SAC + VASE's placebos on MountainCar (issue 77, item 7): does the bonus's content matter?

SAC + VASE reached MountainCar's goal in 5 of 5 seeds where SAC without a bonus found the reward
in 1 of 5 and never reached the goal late in a run. Two placebos, 5 seeds each, at the SAC
study's commit with the placebo's switch added (``recipes/study/sac_placebo.sh``): VASE with
η = 0 (the model trained on the buffer as in every VASE run, its bonus weighing nothing) and
VASE with each sampled batch's bonus shuffled across its transitions (the reward keeps the
bonus's size and spread, not which transition earned it). ``RULE`` says how they are read,
written before any placebo run; ``placebo_section`` applies it with the SAC page's own reading
(``sac_report.reading``: differences of means, the wider of the bootstrap and Welch intervals,
a direction only where both windows show it and every seed is in).

    >>> ANSWERS[0]
    'the content'
"""

from __future__ import annotations

from study_runs import Seed

TASK = "mountain_car"
#: the placebo cells, as ``paper_grid.MEASURES`` names them
ETA_ZERO, SHUFFLED = "vase_eta0", "vase_shuffled"
PLACEBOS = (ETA_ZERO, SHUFFLED)
LABELS = {ETA_ZERO: "SAC + VASE, η = 0", SHUFFLED: "SAC + VASE, bonus shuffled"}
ANSWERS = ("the content", "its size and spread", "undecided", "not measured yet")

RULE = """\
SAC + VASE reached MountainCar's goal in every seed where SAC without a bonus did not. Is it
what the bonus says about each transition, or only that the rewards carry a bonus of that size?
Two placebos, 5 seeds each, at the SAC study's commit with one switch added (off in its runs):
VASE with η = 0 (`surprise.eta=0`: the model trains on the buffer as in every VASE run, its
bonus weighs nothing) and VASE with each sampled batch's bonus shuffled across its transitions
(`shuffle_bonus=true`: the rewards keep the bonus's size and spread, not which transition
earned it).

**The rule** (written on 2026-12-05, before any placebo run), with this page's reading of a
pair (differences of means, a direction where both windows show it):

- **the content** when SAC + VASE is above both placebos;
- **its size and spread** when the shuffled placebo is above the η = 0 one and SAC + VASE is
  not above the shuffled one;
- **undecided** otherwise (at 5 seeds, "no difference shown" is not "the same").

η = 0 against no bonus at all is shown beside, not judged: at that commit they differ in the
random numbers the model's training takes from the learner's generator, nothing else.
"""

#: the pairs read, A − B; the last is shown, not judged
PAIRS = (("vase", ETA_ZERO), ("vase", SHUFFLED), (SHUFFLED, ETA_ZERO), (ETA_ZERO, "none"))


def answer(readings: dict[tuple[str, str], str], labels: dict[str, str]) -> str:
    """``RULE``'s answer from each judged pair's reading (``sac_report.reading``'s text)."""
    if any(text.startswith("not read yet") for pair, text in readings.items()
           if pair in PAIRS[:3]):
        return "not measured yet"

    def above(a: str, b: str) -> bool:
        return readings[a, b] == f"{labels[a]} above {labels[b]} in both windows"

    if above("vase", ETA_ZERO) and above("vase", SHUFFLED):
        return "the content"
    if above(SHUFFLED, ETA_ZERO) and not above("vase", SHUFFLED):
        return "its size and spread"
    return "undecided"


def placebo_section(cells: dict[str, list[Seed]], labels: dict[str, str], reading,
                    finding, **kwargs) -> list[str]:
    """The page's lines: ``RULE``, each pair's figures and reading (``reading``, the page's),
    each cell's finding of the reward (``finding(seeds) -> (found, success)``) and the answer."""
    labels = labels | LABELS
    lines = ["\n### Placebos: does the bonus's content matter? {: #placebos }\n", RULE,
             "| A − B | last 10 % of frames | whole run | reading |", "|---|---:|---:|---|"]
    readings = {}
    for a, b in PAIRS:
        figures, read = reading(cells.get(a, []), cells.get(b, []), labels[a], labels[b],
                                **kwargs)
        readings[a, b] = read
        judged = "" if (a, b) in PAIRS[:3] else " (shown, not judged)"
        lines.append(f"| {labels[a]} − {labels[b]} | " + " | ".join(figures.values())
                     + f" | {read}{judged} |")
    lines += ["", "| cell | runs | found the reward | success rate, last 10 % |",
              "|---|---:|---|---|"]
    for measure in ("none", "vase", *PLACEBOS):
        found, rate = finding(cells.get(measure, []))
        lines.append(f"| {labels[measure]} | {len(cells.get(measure, []))} | {found} | {rate} |")
    lines.append(f"\n**Answer: {answer(readings, labels)}.**")
    return lines
