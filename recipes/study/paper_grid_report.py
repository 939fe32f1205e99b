"""The results page of the paper's Figure 3 (``docs/results.md``) and its figures, from the
studies' exported runs.

The page opens with the study at the authors' configuration (issue 38, ``--study``,
``figure3_report.py``): the claims judged in three windows with unpaired comparisons
(``figure3_claims.py`` with ``study_statistics.py``), the point robot's steps to the first
reward, how far the study has come (``figure3_status.py``), per-task curves of the
paper's four measures, the extras and rliable's aggregates across tasks, its figures written
beside its CSVs. The earlier study at the former defaults (issue 26, ``--grid``,
``earlier_study_report.py``) follows it, its figures written into ``--figures``. Both read the
exported runs through ``study_runs.py``; ``study_figures.py`` sets how their figures look.

    python recipes/study/paper_grid_report.py [--study docs/results/figure3] \\
        [--grid docs/results/paper_grid] [--page docs/results.md]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from earlier_study_report import earlier_section  # beside this script, as are the others
from figure3_report import study_section
from study_runs import ROOT


def _link(target: Path, page: Path) -> str:
    """``target`` as the page links it: relative to the page's folder."""
    return Path(os.path.relpath(target, page.parent)).as_posix()


def report(grid: Path, page: Path, figures: Path | None = None,
           study: Path | None = None, earlier_page: Path | None = None) -> dict[str, Path]:
    """Write the results page ``page``: the study at the authors' configuration (``study``, its
    figures beside its CSVs), then the earlier study (``grid``, its figures into ``figures``,
    default ``grid``), on a page of its own where ``earlier_page`` is given (the results page
    then links it); return every file written by name."""
    figures = figures or grid
    page.parent.mkdir(parents=True, exist_ok=True)
    text, written = earlier_section(grid, figures, _link(figures, earlier_page or page))
    written["report"] = page
    if study is not None:
        part, drawn = study_section(study, study, _link(study, page))
        written.update({f"figure3/{name}": path for name, path in drawn.items()})
        if earlier_page is not None:
            earlier_page.write_text(text)
            written["earlier"] = earlier_page
            link = _link(earlier_page, page)
            text = part + (f"\n## The earlier study at the former defaults\n\nThe paper's "
                           f"claims judged on our first study (issue 26), at the recipe's "
                           f"defaults of the time (`preset=former_defaults`: a mix of the "
                           f"paper's text and the authors' code), seeds 0–9: "
                           f"[its page]({link}).\n")
        else:
            # the earlier study becomes the page's second part: its headings one level down
            earlier = text.replace("\n## ", "\n### ").replace("# The earlier study",
                                                               "## The earlier study", 1)
            text = part + "\n" + earlier
    page.write_text(text)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, default=ROOT / "docs" / "results" / "paper_grid")
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "results.md",
                        help="the results page to write")
    parser.add_argument("--figures", type=Path, default=None, help="default: --grid")
    parser.add_argument("--study", type=Path, default=ROOT / "docs" / "results" / "figure3",
                        help="the study at the authors' configuration (the page's first part)")
    parser.add_argument("--earlier-page", type=Path,
                        default=ROOT / "docs" / "results_former_defaults.md",
                        help="the earlier study's page of its own (the results page links it)")
    args = parser.parse_args()
    written = report(args.grid, args.page, args.figures, args.study, args.earlier_page)
    for name, path in written.items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
