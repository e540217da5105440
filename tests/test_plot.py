"""sievesim plot / sievesim.plotting: any sweep output, the paper's Pareto by default."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")

from sievesim.cli import main
from sievesim.errors import SievesimError
from sievesim.plotting import DEFAULT_X, DEFAULT_Y, plot_results, save_plot
from sievesim.sweep import expand_grid, run_grid, step_point


def _rows() -> list[dict]:
    rows = []
    for model in ("m1", "m2"):
        for policy, unit in (("sieve", None), ("pimoe", "stack"), ("pimoe", "channel")):
            for batch in (1, 4, 16):
                t = 1e-3 * (1 + batch / 8) * (2 if policy == "pimoe" else 1)
                rows.append({"model": model, "policy": policy, "pimoe_unit": unit, "batch": batch,
                             "step_time_s": t, DEFAULT_X: 1 / t, DEFAULT_Y: batch / t})
    return rows


def test_default_is_the_pareto_one_line_per_policy_one_panel_per_model():
    fig = plot_results(_rows())
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["model = m1", "model = m2"]
    for ax in axes:
        assert ax.get_xlabel() == DEFAULT_X and ax.get_ylabel() == DEFAULT_Y
        labels = [line.get_label() for line in ax.get_lines()]
        assert labels == ["sieve", "pimoe(stack)", "pimoe(channel)"]
        xs = ax.get_lines()[0].get_xdata()
        assert list(xs) == sorted(xs) and len(xs) == 3


def test_any_columns_log_axes_and_where():
    fig = plot_results(_rows(), x="batch", y="step_time_s", color="model", facet="policy", logx=True, logy=True,
                       where={"pimoe_unit": "stack"})
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 1 and axes[0].get_title() == "policy = pimoe(stack)"
    assert axes[0].get_xscale() == "log" and axes[0].get_yscale() == "log"
    assert [line.get_label() for line in axes[0].get_lines()] == ["m1", "m2"]


def test_a_bad_column_names_every_column():
    with pytest.raises(SievesimError, match=r"--y = 'step_time': expected a column of the results "
                                            r"\(did you mean 'step_time_s'\?\); they have: model, policy"):
        plot_results(_rows(), y="step_time")
    with pytest.raises(SievesimError, match="--x = 'policy': expected a column of numbers"):
        plot_results(_rows(), x="policy")


@pytest.mark.parametrize("fmt, magic", [("png", b"\x89PNG"), ("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_cli_writes_png_svg_pdf_the_same_bytes_twice(tmp_path, capsys, fmt, magic):
    src = tmp_path / "results.jsonl"
    src.write_text("".join(json.dumps({"point_id": str(i), **r}) + "\n" for i, r in enumerate(_rows())))
    out1, out2 = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
    assert main(["plot", str(src), "--out", str(out1)]) == 0
    assert main(["plot", str(src), "--out", str(out2)]) == 0
    assert out1.read_bytes().startswith(magic) and out1.read_bytes() == out2.read_bytes()
    assert f"wrote {out1}" in capsys.readouterr().out


def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys):
    src = tmp_path / "r.csv"
    src.write_text("batch,step_time_s\n1,0.001\n2,0.002\n")
    for argv, message in ((["--x", "batchs", "--y", "step_time_s"], "--x = 'batchs': expected a column of the "
                           "results (did you mean 'batch'?); they have: batch, step_time_s"),
                          ([], f"--x = '{DEFAULT_X}': expected a column of the results"),
                          (["--x", "batch", "--y", "step_time_s", "--out", str(tmp_path / "p.pgf")],
                           "expected a file ending in .png, .svg, .pdf"),
                          (["--x", "batch", "--y", "step_time_s", "--where", "batch"], "--where = 'batch'")):
        assert main(["plot", str(src), *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert main(["plot", str(tmp_path / "missing.jsonl")]) == 2
    assert f"file not found: {tmp_path / 'missing.jsonl'}" in capsys.readouterr().err
    assert main(["plot", str(src), "--x", "batch", "--y", "step_time_s"]) == 0
    assert (tmp_path / "plot.png").exists()


def test_a_real_sweep_plots_with_the_defaults(tmp_path):
    points = expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [4, 16], "policy": ["sieve", "allexp"],
                           "warmup": [0]}])
    run_grid(points, tmp_path, point_fn=step_point, progress=None)
    path = save_plot(plot_results(tmp_path), tmp_path / "pareto.png")
    assert path.stat().st_size > 1000


# ------------------------------------------------------------------------------------------------
# hostile text and numbers (issue 69, item 6)


def _texts(fig) -> list[str]:
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        if ax.get_legend() is not None:
            out += [t.get_text() for t in ax.get_legend().get_texts()] + [ax.get_legend().get_title().get_text()]
    return out


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_mathtext_in_the_title_and_the_results_is_drawn_as_text(tmp_path, capsys, fmt):
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps({"point_id": str(i), "rate": i + 1.0, "goodput_requests_per_s": i * 1.5,
                                     "policy": p, "model": m}) + "\n"
                         for i, (p, m) in enumerate([(r"$\bad$", "a$"), (r"$\bad$", "a$"), ("$x", r"$\m$")])))
    out = tmp_path / f"p.{fmt}"
    assert main(["plot", str(f), "--title", r"$\foo$", "--out", str(out)]) == 0, capsys.readouterr().err
    assert out.stat().st_size > 0
    fig = plot_results(f, title=r"$\foo$")
    shown = _texts(fig)
    assert r"\$\foo\$" in shown and r"\$\bad\$" in shown and "model = \\$\\m\\$" in shown, shown
    assert all("$" not in t.replace(r"\$", "") for t in shown), shown


@pytest.mark.parametrize("bad, why", [(1e308, "beyond"), (-1e308, "beyond"), (float("nan"), "not finite"),
                                      (float("inf"), "not finite"), (10 ** 400, "not finite")])
def test_values_that_cannot_be_drawn_are_left_out_with_a_warning(tmp_path, bad, why):
    rows = [{"rate": 1.0, "goodput_requests_per_s": bad, "policy": "sieve"},
            {"rate": 2.0, "goodput_requests_per_s": -bad if bad == bad else 2.0, "policy": "sieve"},
            {"rate": 3.0, "goodput_requests_per_s": 1.0, "policy": "sieve"}]
    with pytest.warns(UserWarning, match=f"row\\(s\\) left out of the plot: goodput_requests_per_s {why}"):
        fig = plot_results(rows)
    save_plot(fig, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    line = fig.axes[0].get_lines()[0]
    assert 3.0 in list(line.get_xdata())


@pytest.mark.parametrize("ys", [[8.048e134, 1e300], [1e200, 1e300], [1e-300, 1e300], [1e90, 1e-90, 1e91]])
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_a_log_axis_keeps_the_decades_matplotlib_can_tick(tmp_path, ys, fmt):
    # 1e200 and 1e300 on one log axis: matplotlib put a tick past 1e308 and its label overflowed
    # (OverflowError from the log formatter, found by tests/test_fuzz_serving.py)
    rows = [{"rate": float(i + 1), "goodput_requests_per_s": y, "policy": "sieve"} for i, y in enumerate(ys)]
    kept = [y for y in ys if 1e-90 <= y <= 1e90]
    with pytest.warns(UserWarning, match=r"left out of the plot: goodput_requests_per_s outside 1e-90 \.\. 1e90 "
                                         r"on the logarithmic y axis"):
        fig = plot_results(rows, logy=True)
    save_plot(fig, tmp_path / f"p.{fmt}")
    ax = fig.axes[0]
    shown = [v for line in ax.get_lines() for v in line.get_ydata()]
    assert sorted(shown) == sorted(kept)
    lo, hi = ax.get_ylim()
    assert all(lo <= v <= hi for v in shown), (lo, hi)      # the view holds them (it fell back to 1 .. 10)


def test_the_widest_log_span_is_drawn_in_view_on_every_layout(tmp_path):
    for panels in (1, 4, 7):
        rows = [{"rate": x, "goodput_requests_per_s": y, "model": f"m{i % panels}"}
                for i, (x, y) in enumerate([(1e-90, 1e90), (1e90, 1e-90), (1.0, 1.0)] * panels)]
        fig = plot_results(rows, logx=True, logy=True)
        save_plot(fig, tmp_path / "p.svg")
        for ax in fig.axes:
            for line in ax.get_lines():
                (xlo, xhi), (ylo, yhi) = ax.get_xlim(), ax.get_ylim()
                assert all(xlo <= v <= xhi for v in line.get_xdata()) and all(ylo <= v <= yhi for v in line.get_ydata())


def test_zero_on_a_log_axis_is_left_out_with_a_warning():
    rows = [{"rate": 1.0, "goodput_requests_per_s": 0.0}, {"rate": 2.0, "goodput_requests_per_s": 1.0}]
    with pytest.warns(UserWarning, match="not positive on the logarithmic y axis"):
        plot_results(rows, logy=True)


@pytest.mark.parametrize("call, needle", [
    (lambda: plot_results(None), "results = None"), (lambda: plot_results(5), "results = 5"),
    (lambda: plot_results([1, 2]), r"results\[0\] = 1"), (lambda: save_plot(plot_results(_rows()), 5), "path = 5"),
    (lambda: save_plot(None, "p.png"), "fig = None"),
])
def test_the_plotting_api_names_a_wrong_type(call, needle):
    from sievesim.plotting import columns_of
    with pytest.raises(TypeError, match=needle):
        call()
    with pytest.raises(TypeError, match="rows = None"):
        columns_of(None)
    with pytest.raises(SievesimError, match="no result rows"):
        plot_results([])


def test_every_format_matplotlib_writes_is_written_without_a_date(tmp_path):
    from sievesim.plotting import FORMATS
    fig = plot_results([{"rate": 1.0, "goodput_requests_per_s": 1.0}, {"rate": 2.0, "goodput_requests_per_s": 3.0}])
    for fmt in FORMATS:
        a, b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
        save_plot(fig, a)
        assert a.stat().st_size > 0, fmt
        if fmt in ("eps", "ps", "svgz"):     # a date or a gzip time in the file unless taken out
            save_plot(fig, b)
            assert a.read_bytes() == b.read_bytes(), fmt
    with pytest.raises(SievesimError, match=r"\.pgf = |p\.pgf"):
        save_plot(fig, tmp_path / "p.pgf")
