"""``sievesim reproduce``: the Sieve paper's figures, each as CSV + PNG next to the paper's claims.

One module per figure holds its data function, its plot and its claims::

    registry.py      Claim, FigureData, FigureOptions, register_figure, reproduce, step_records, the report,
                     and the judge (judge_gain, judge_not_behind, judge_share_below: docs/reproduction.md)
    common.py        what figures share: routing statistics (3, 5), executed-step points (6, 9-11)
    warmup.py        the cost table warmed to convergence before the measured step (9-11)
    reasons.py       the "why" of a verdict, written from measured quantities
    plotting.py      the plot boilerplate (lay out, save, close)
    fig3.py ... fig11.py, overestimate.py, overhead.py, energy.py, gap.py  the figures, in the order ``all`` runs them

A figure is one function registered with :func:`register_figure`::

    @register_figure("fig3", "Activated-parameter ratio vs batch size", plot=plot_fig3)
    def fig3(opts: FigureOptions) -> FigureData:
        records = [...]                      # flat dicts, units in the keys
        claims = [Claim("GPT-OSS act-ratio at B=1", "2.4 %", f"{x:.1%}")]
        return FigureData(records, claims)

``compute(opts)`` returns the records (written to ``NAME.csv``) and the paper's claims beside our
numbers (printed as a table); ``plot(data, path)`` draws ``NAME.png`` with matplotlib, which is an
optional extra: without it the CSV is still written and the report says how to get plots.
``opts.quick`` asks for the reduced version (fewer batch sizes and steps; under a minute on two
cores). ``reproduce("all", ...)`` runs every registered figure in registration order: the order
in which this package imports the figure modules below. A figure that needs the executed step
gets its rows from :func:`step_records` (a resumable sweep kept in ``OUT/NAME-points/``, run on
``opts.jobs`` processes).
"""
from __future__ import annotations

from .common import PAPER_MODELS, READINGS, STEP_MODELS, TEXT_TOP_K
from .registry import (COMPARABLE_TOLERANCE, FIGURES, GAIN_TOLERANCE, NO_NUMBER, NOT_JUDGED, NOT_OUR_MODEL,
                       NOT_THE_PAPER, REPRODUCED, VERDICTS, Claim, Figure, FigureData, FigureOptions, FigureReport,
                       accepted_ratios, figure_names, format_report, gain_within, judge, judge_gain, judge_not_behind,
                       judge_share_below, register_figure, reproduce, step_records, within)

# The figures register themselves on import, in the paper's order (the order of ``reproduce all``).
from . import fig3, fig4, fig5, fig6, fig9, fig10, fig11, overestimate, overhead, energy, gap  # noqa: F401  isort: skip

__all__ = ["Claim", "FigureData", "FigureOptions", "Figure", "FigureReport", "FIGURES",
           "register_figure", "figure_names", "reproduce", "step_records", "format_report",
           "PAPER_MODELS", "STEP_MODELS", "READINGS", "TEXT_TOP_K", "judge", "within", "VERDICTS", "REPRODUCED",
           "NOT_THE_PAPER", "NOT_OUR_MODEL", "NO_NUMBER", "NOT_JUDGED", "GAIN_TOLERANCE", "COMPARABLE_TOLERANCE",
           "accepted_ratios", "gain_within", "judge_gain", "judge_not_behind", "judge_share_below"]
