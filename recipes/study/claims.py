"""A study as data, and its claims judged by one function.

A study config (``conf/study/<name>.yaml``) names its tasks, measures (each a set of recipe
overrides), cells (tasks × measures × seeds), the claims of the paper as records (``claims``:
the sentence, the task, the pairs compared, the kind) and the follow-up questions asked of it
(``questions``: named tests and the answers they lead to). ``load_study`` reads and checks it
before anything runs; ``judge`` gives every record its verdict in the primary window (the whole
run) and the sensitivity window (the last 10 %) by the rule of ``docs/results_rule.md``.

    >>> study = load_study("figure3")
    >>> [c.id for c in study.claims][:2], study.seeds["ant", "vase_linear_eta_tenth"]
    (['mountain-car', 'double-pendulum'], range(0, 10))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from dataset import Run, cells, read
from omegaconf import OmegaConf
from scipy.stats import rankdata
from study_statistics import (
    RESAMPLES,
    WINDOWS,
    MedianComparison,
    Sooner,
    Step,
    borderline,
    holm_steps,
    judge_better,
    judge_equivalent,
    mc_error,
    mean_comparison,
    median_comparison,
    sooner,
    window_mean,
)

ROOT = Path(__file__).resolve().parents[2]
PRIMARY, SENSITIVITY = "whole", "last10pct"
KINDS = ("better", "alike", "sooner")
TESTS = ("above", "within", "sooner", "as_soon", "at_scale", "above_both")
TITLES = {"mountain_car": "MountainCar", "cartpole_swingup": "CartpoleSwingup",
          "double_pendulum": "DoublePendulum", "half_cheetah": "HalfCheetah", "ant": "Ant",
          "lunar_lander": "LunarLanderContinuous", "point_robot": "point robot"}


@dataclass(frozen=True)
class Pair:
    """A − B, read in a primary and a sensitivity window."""

    a: str
    b: str
    primary: str = PRIMARY
    sensitivity: str = SENSITIVITY


@dataclass(frozen=True)
class Claim:
    id: str
    task: str
    kind: str
    says: str
    short: str
    pairs: tuple[Pair, ...]
    budget: float = math.nan  # ``sooner``: the steps a run may take


@dataclass(frozen=True)
class Question:
    id: str
    task: str
    asks: str
    written: str
    tests: dict[str, tuple]  # name -> (test, A, B or level)
    answers: tuple[tuple[str, dict[str, bool]], ...]
    min_seeds: int
    budget: float = math.nan


@dataclass(frozen=True)
class Choice:
    """A setting chosen among ``candidates`` (measures) by a rule written before their runs: each
    task ranks them (``first_reward``: mean steps to it, a miss at ``budget``; ``return``: mean
    return over the window; ties share a rank); the lowest mean rank wins, a tie the first."""

    id: str
    asks: str
    written: str
    tasks: dict[str, str]  # task -> its score: return or first_reward
    candidates: tuple[str, ...]
    min_seeds: int
    budget: float = math.nan


@dataclass(frozen=True)
class Study:
    name: str
    dataset: Path
    commit: str
    algorithm: str
    tasks: tuple[str, ...]
    measures: dict[str, dict]  # name -> {overrides, label, colour}
    seeds: dict[tuple[str, str], range]  # (task, measure) -> seeds
    task_overrides: dict[str, list[str]]
    figure: tuple[str, ...]
    margin_fraction: float
    margin_measures: tuple[str, ...]
    min_seeds: int
    claims: tuple[Claim, ...]
    questions: tuple[Question, ...]
    #: commits shown to train alike: ``{commits, measures, evidence}`` records
    commits_alike: tuple[dict, ...] = ()
    choices: tuple[Choice, ...] = ()
    title: str = ""  # a study without claims: its page's title and first paragraph
    about: str = ""

    def label(self, measure: str) -> str:
        return self.measures[measure]["label"]

    def runs(self) -> dict[str, dict[str, list[Run]]]:
        """``task -> measure -> runs`` from the study's dataset (finished runs only)."""
        return cells(read(self.dataset))


def _seeds(text: str | int) -> range:
    low, _, high = str(text).partition("-")
    return range(int(low), int(high or low) + 1)


def _check(name: str, value: str, choices, where: str) -> None:
    if value not in choices:
        raise ValueError(f"{where}: unknown {name} {value!r}; the choices: "
                         f"{', '.join(sorted(choices))}.")


def load_study(name: str | Path) -> Study:
    """The study ``conf/study/<name>.yaml`` (or a path), every name in it checked: an unknown
    task, measure, override group, window, kind or test is refused with the choices."""
    path = Path(name) if str(name).endswith(".yaml") else ROOT / "conf" / "study" / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (ROOT / "conf" / "study").glob("*.yaml"))
        raise ValueError(f"unknown study {str(name)!r}; the choices: {', '.join(known)}.")
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    tasks_known = sorted(p.stem for p in (ROOT / "conf" / "env").glob("*.yaml"))
    # the config groups and the recipe's top-level settings an override may name
    groups = {p.name for p in (ROOT / "conf").iterdir() if p.is_dir()} | set(
        OmegaConf.load(ROOT / "conf" / "trpo_vase.yaml"))
    for task in raw["tasks"]:
        _check("task", task, tasks_known, path.name)
    measures = raw["measures"]
    for measure, spec in measures.items():
        for override in spec["overrides"]:
            _check("override", override.split("=")[0].split(".")[0].lstrip("+"), groups,
                   f"measure {measure}")
    seeds = {}
    for block in raw["cells"]:
        for task in block["tasks"]:
            _check("task", task, raw["tasks"], f"{path.name} cells")
            for measure in block["measures"]:
                _check("measure", measure, measures, f"{path.name} cells")
                seeds[task, measure] = _seeds(block["seeds"])

    def pair(spec: list, where: str) -> Pair:
        for measure in spec[:2]:
            _check("measure", measure, measures, where)
        for window in spec[2:]:
            _check("window", window, WINDOWS, where)
        return Pair(*spec)

    claims = []
    for spec in raw.get("claims") or []:
        where = f"claim {spec['id']}"
        _check("kind", spec["kind"], KINDS, where)
        _check("task", spec["task"], raw["tasks"], where)
        claims.append(Claim(spec["id"], spec["task"], spec["kind"], spec["says"], spec["short"],
                            tuple(pair(p, where) for p in spec["pairs"]),
                            float(spec.get("budget", math.nan))))
    questions = []
    for spec in raw.get("questions") or []:
        where = f"question {spec['id']}"
        for test, *args in spec["tests"].values():
            _check("test", test, TESTS, where)
            if test == "as_soon" and not (len(args) == 3 and 0 < float(args[2]) < 0.5):
                raise ValueError(f"{where}: as_soon takes [as_soon, A, B, margin], the margin "
                                 f"on P(A sooner) in (0, 0.5); got {[test, *args]}.")
            for measure in args[:2 if test != "at_scale" else 1]:
                _check("measure", measure, measures, where)
        for _, conditions in spec["answers"]:
            for test in conditions:
                _check("test name", test, spec["tests"], where)
        questions.append(Question(
            spec["id"], spec["task"], spec["asks"], str(spec["written"]),
            {k: tuple(v) for k, v in spec["tests"].items()},
            tuple((answer, dict(conditions)) for answer, conditions in spec["answers"]),
            int(spec.get("min_seeds", raw["min_seeds"])), float(spec.get("budget", math.nan))))
    choices = []
    for spec in raw.get("choices") or []:
        where = f"choice {spec['id']}"
        for task, score in spec["tasks"].items():
            _check("task", task, raw["tasks"], where)
            _check("score", score, ("return", "first_reward"), where)
        for measure in spec["candidates"]:
            _check("measure", measure, measures, where)
        if "first_reward" in spec["tasks"].values() and "budget" not in spec:
            raise ValueError(f"{where}: a first_reward score needs the budget of steps a run may "
                             "take (budget: ...).")
        choices.append(Choice(spec["id"], spec["asks"], str(spec["written"]), dict(spec["tasks"]),
                              tuple(spec["candidates"]), spec.get("min_seeds", raw["min_seeds"]),
                              float(spec.get("budget", math.nan))))
    ids = [r.id for r in (*claims, *questions, *choices)]
    if len(set(ids)) < len(ids):
        raise ValueError(f"{path.name}: two records share an id.")
    return Study(raw["name"], ROOT / raw["dataset"], str(raw["commit"]), raw["algorithm"],
                 tuple(raw["tasks"]), measures, seeds, raw.get("task_overrides") or {},
                 tuple(raw["figure"]), float(raw["margin"]["fraction"]),
                 tuple(raw["margin"]["measures"]), int(raw["min_seeds"]), tuple(claims),
                 tuple(questions), tuple(raw.get("commits_alike") or ()), tuple(choices),
                 str(raw.get("title") or f"The study {raw['name']}"), str(raw.get("about") or ""))


# ------------------------------------------------------------------------------------------------
# The rule
# ------------------------------------------------------------------------------------------------
def windows(runs: list[Run], window: str) -> np.ndarray:
    """Each run's mean return over ``window``."""
    return np.array([window_mean(run.returns, window) for run in runs])


def first_reward_steps(runs: list[Run]) -> np.ndarray:
    """Each run's steps to its first extrinsic reward; ``inf`` for one that never found it."""
    return np.array([run.first_reward if np.isfinite(run.first_reward) else math.inf
                     for run in runs])


def task_margin(study: Study, task_runs: dict[str, list[Run]]) -> float:
    """The task's smallest effect of interest: ``margin_fraction`` of the span from the 5th to
    the 95th percentile of every iteration's return of ``margin_measures``' runs."""
    curves = [run.returns for m in study.margin_measures for run in task_runs.get(m, [])]
    values = np.concatenate(curves) if curves else np.array([])
    values = values[np.isfinite(values)]
    if not values.size:
        return math.nan
    low, high = np.percentile(values, [5, 95])
    return study.margin_fraction * float(high - low)


@dataclass
class Verdict:
    """A record's verdict: in the primary and the sensitivity window, each pair's (or test's)
    comparison in both, the margin and the seeds it read."""

    record: Claim | Question | Choice
    verdict: str
    sensitivity: str
    comparisons: dict[str, tuple] = field(default_factory=dict)  # name -> (primary, sensitivity)
    margin: float = math.nan
    seeds: dict[str, int] = field(default_factory=dict)
    #: the primary verdict's comparison nearest its threshold (its p, Monte-Carlo error and
    #: threshold; a question's, among the tests its answer rests on), the bootstrap's resamples,
    #: and whether any deciding comparison stayed within 3 errors of its threshold
    step: Step | None = None
    resamples: int = RESAMPLES
    borderline: bool = False

    @property
    def flagged(self) -> bool:
        return self.verdict != "not measured yet" and self.sensitivity != self.verdict


def _pair_name(pair: Pair) -> str:
    return f"{pair.a} − {pair.b}"


#: the bootstrap's resamples, tried in turn while a verdict's deciding p lies within 3 Monte-Carlo
#: errors of its threshold
RESAMPLINGS = (RESAMPLES, 10 * RESAMPLES, 100 * RESAMPLES)


def _judge_claim(study: Study, claim: Claim, runs: dict[str, list[Run]], margin: float,
                 seeds: dict[str, int], seed: int = 0) -> Verdict:
    if min(seeds.values()) < study.min_seeds or (claim.kind != "sooner" and not margin > 0):
        return Verdict(claim, "not measured yet", "not measured yet", margin=margin, seeds=seeds)
    for resamples in RESAMPLINGS:
        if claim.kind == "sooner":
            (pair,) = claim.pairs
            test = sooner(first_reward_steps(runs[pair.a]), first_reward_steps(runs[pair.b]),
                          claim.budget, resamples=resamples, seed=seed)
            verdict = Verdict(claim, {"sooner": "reproduced", "later": "not reproduced"}.get(
                test.reading, "inconclusive"), "–", {_pair_name(pair): (test, None)},
                seeds=seeds, step=test.step, resamples=resamples, borderline=test.borderline)
        else:
            judge = judge_better if claim.kind == "better" else judge_equivalent
            compared = {_pair_name(p): tuple(
                median_comparison(windows(runs[p.a], w), windows(runs[p.b], w), margin,
                                  resamples=resamples, seed=seed)
                for w in (p.primary, p.sensitivity)) for p in claim.pairs}
            primary, sensitivity = (judge([c[i] for c in compared.values()]) for i in (0, 1))
            verdict = Verdict(claim, primary.verdict, sensitivity.verdict, compared, margin,
                              seeds, primary.step, resamples, primary.borderline)
        if not verdict.borderline:
            break
    return verdict


def _test(study: Study, question: Question, spec: tuple, runs: dict[str, list[Run]],
          margin: float, window: str, resamples: int, seed: int
          ) -> tuple[bool, object, Step | None]:
    """One test of a question in ``window``: whether it holds, what it read, and the
    comparison that decided it where a bootstrap's Monte-Carlo error can move it."""
    kind, a, b, *equivalence = spec  # as_soon: its margin on P(A sooner)
    if kind in ("sooner", "as_soon"):
        test = sooner(first_reward_steps(runs[a]), first_reward_steps(runs[b]), question.budget,
                      resamples=resamples, seed=seed,
                      margin=float(equivalence[0]) if equivalence else None)
        if kind == "as_soon":  # P(A sooner) within 0.5 ± margin
            return test.as_soon, test, test.as_soon_step
        return test.reading == "sooner", test, test.step
    if kind == "at_scale":
        firsts = [first_bonus(run, eta(run)) for run in runs[a]]
        median = float(np.nanmedian(firsts))
        return median <= float(b), median, None
    if kind == "above_both":
        read = [mean_comparison(windows(runs[a], w), windows(runs[b], w))
                for w in (SENSITIVITY, PRIMARY)]
        return all(c is not None and c.sign > 0 for c in read), read, None
    comparison = median_comparison(windows(runs[a], window), windows(runs[b], window), margin,
                                   resamples=resamples, seed=seed)
    p = comparison.p_above_zero if kind == "above" else comparison.p_below_margin
    rejected, (step,) = holm_steps([p], [mc_error(p, resamples)])
    return rejected[0], comparison, step


def _judge_question(study: Study, question: Question, runs: dict[str, list[Run]],
                    margin: float, seeds: dict[str, int], seed: int = 0) -> Verdict:
    if min(seeds.values()) < question.min_seeds:
        return Verdict(question, "not measured yet", "not measured yet", margin=margin,
                       seeds=seeds)
    for resamples in RESAMPLINGS:
        answers, read = [], {name: [None, None] for name in question.tests}
        steps: dict[str, Step] = {}
        for index, window in enumerate((PRIMARY, SENSITIVITY)):
            held = {}
            for name, spec in question.tests.items():
                held[name], read[name][index], step = _test(study, question, spec, runs, margin,
                                                            window, resamples, seed)
                if index == 0 and step is not None:
                    steps[name] = step
            answers.append(next(answer for answer, conditions in question.answers
                                if all(held[t] == want for t, want in conditions.items())))
        # the page shows the p of a test the answer rests on; any test near its threshold
        # makes the verdict borderline, for a flip of any test could change the answer
        deciding = dict(question.answers)[answers[0]]
        shown = [steps[name] for name in deciding if name in steps] or list(steps.values())
        step = min(shown, key=lambda s: s.near, default=None)
        nearest = min(steps.values(), key=lambda s: s.near, default=None)
        verdict = Verdict(question, *answers, {k: tuple(v) for k, v in read.items()}, margin,
                          seeds, step, resamples, borderline(nearest))
        if not verdict.borderline:
            break
    return verdict


def judge(study: Study, record: Claim | Question,
          data: dict[str, dict[str, list[Run]]], seed: int = 0) -> Verdict:
    """``record``'s verdict on ``data`` (``Study.runs()``): a claim by its kind's rule, a
    question by the first answer whose tests all hold; *not measured yet* while a measure it
    reads has fewer than its minimum of seeds."""
    runs = data.get(record.task, {})
    if isinstance(record, Claim):
        measures = [m for p in record.pairs for m in (p.a, p.b)]
    else:
        measures = [m for spec in record.tests.values()
                    for m in (spec[1:3] if spec[0] != "at_scale" else spec[1:2])]
    seeds = {m: len(runs.get(m, [])) for m in dict.fromkeys(measures)}
    margin = task_margin(study, runs) if record.task != "point_robot" else math.nan
    if isinstance(record, Claim):
        return _judge_claim(study, record, runs, margin, seeds, seed)
    return _judge_question(study, record, runs, margin, seeds, seed)


def choose(study: Study, choice: Choice, data: dict[str, dict[str, list[Run]]]) -> Verdict:
    """``choice``'s pick (its label), whole run and last 10 %, each candidate's scores beside."""
    seeds = {m: min(len(data.get(t, {}).get(m, [])) for t in choice.tasks)
             for m in choice.candidates}
    if min(seeds.values()) < choice.min_seeds:
        return Verdict(choice, "not measured yet", "not measured yet", seeds=seeds)
    chosen, read = [], {m: ({}, {}) for m in choice.candidates}
    for index, window in enumerate((PRIMARY, SENSITIVITY)):
        scores = {task: np.array([  # mean steps to the first reward, or mean return
            np.minimum(first_reward_steps(data[task][m]), choice.budget).mean()
            if score == "first_reward" else windows(data[task][m], window).mean()
            for m in choice.candidates]) for task, score in choice.tasks.items()}
        mean_rank = np.mean([rankdata(v if choice.tasks[t] == "first_reward" else -v)
                             for t, v in scores.items()], axis=0)  # fewer steps, more return
        for i, m in enumerate(choice.candidates):
            read[m][index].update({t: float(v[i]) for t, v in scores.items()},
                                  **{"mean rank": float(mean_rank[i])})
        chosen.append(study.label(choice.candidates[int(np.argmin(mean_rank))]))  # a tie: first
    return Verdict(choice, *chosen, read, seeds=seeds)


def judge_all(study: Study, data: dict | None = None, seed: int = 0) -> list[Verdict]:
    """Every claim and question of ``study``, each judged once (``seed``: the bootstraps'),
    then its choices."""
    data = study.runs() if data is None else data
    return [*(judge(study, record, data, seed) for record in (*study.claims, *study.questions)),
            *(choose(study, choice, data) for choice in study.choices)]


def eta(run: Run) -> float:
    """The bonus weight η the run ran with (its resolved configuration)."""
    return float(OmegaConf.create(run.provenance["config"]).surprise.eta)


def first_bonus(run: Run, eta: float) -> float:
    """η·U a step at the run's first iteration with a bonus (the model's first), NaN if none."""
    bonus = run.metric("bonus/mean")
    bonus = bonus[np.isfinite(bonus) & (bonus > 0)]
    return float(eta * bonus[0]) if bonus.size else math.nan


__all__ = ["Choice", "MedianComparison", "Sooner", "choose", "judge", "judge_all", "load_study"]
