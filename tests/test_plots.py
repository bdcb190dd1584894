"""What the experiments' figures show, drawn from synthetic rows through ``plots.plot_results``. The default pair
of formats is rendered in test_bandwidth_figure, SVG where a text must survive a draw as written; where a figure's
words are what is checked, they are read off the figure (:func:`blank_figures.texts`), not drawn. Every view's PNG
is drawn for real in the report of the committed H200 runs (test_report)."""

import matplotlib.image
import pytest

import synthetic
from blank_figures import texts
from bench import views
from bench.analysis import selection, plots


def test_bandwidth_figure(tmp_path):
    paths = plots.plot_results(synthetic.bandwidth_rows(failed=2), tmp_path, synthetic.views())
    assert [p.name for p in paths] == ["bandwidth.png", "bandwidth.svg"]
    height, width, _ = matplotlib.image.imread(paths[0]).shape
    assert width > 1500 and height > 700
    svg = paths[1].read_text()
    assert "PCIe Gen5 x16 theoretical, one direction (63.0 GB/s)" in svg
    assert "source + destination = L2 (63 MB)" in svg
    assert "2 configuration(s) failed" in svg and "H2D pinned" in svg and "D2D device" in svg


def test_unknown_experiments_draw_nothing(tmp_path):
    rows = synthetic.bandwidth_rows()
    rows["experiment"] = "something-else"
    assert plots.plot_results(rows, tmp_path, synthetic.views()) == []


def test_overlap_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "render", texts)
    rows = synthetic.overlap_rows()
    paths = plots.plot_results(rows, tmp_path, synthetic.views(), {"timeline": synthetic.overlap_timeline(rows)},
                               formats=("svg",))
    assert sorted(p.name for p in paths) == sorted(f"overlap_{kind}.svg" for kind in ("scaling", "heatmap", "timeline"))
    scaling = (tmp_path / "overlap_scaling.svg").read_text()
    assert "pinned, 4 chunks/stream" in scaling and "90% of bound" in scaling
    assert "makespan" in (tmp_path / "overlap_timeline.svg").read_text()


def test_overlap_figures_without_a_timeline():
    stems = []
    for _, stem, figure in plots.draw(synthetic.overlap_rows(), {}, synthetic.views()):
        stems.append(stem)
        plots.pyplot().close(figure)
    assert "overlap_scaling" in stems and "overlap_timeline" not in stems


def test_truth_table_alloc_and_launch_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "render", texts)
    rows = synthetic.frame(synthetic.blocking_records() + synthetic.alloc_records() + synthetic.graphs_records()
                           + synthetic.launch_records())
    paths = plots.plot_results(rows, tmp_path, synthetic.views(), formats=("svg",))
    names = sorted(path.name for path in paths)
    assert names == sorted(f"{stem}.svg" for stem in ("blocking_truth_table", "alloc", "launch"))  # one truth table
    truth = (tmp_path / "blocking_truth_table.svg").read_text()
    assert "cudaGetLastError" in truth.splitlines() and "waits-for-device" in truth and "serializes" in truth
    width, height = map(int, truth.splitlines()[0].split("x"))
    assert width > 1500 and height > 700  # its PNG's pixels
    assert "cudaMallocAsync, release threshold max" in (tmp_path / "alloc.svg").read_text()
    assert "dispatcher" in (tmp_path / "launch.svg").read_text()


HOSTILE = ("GPU $\\bad{$ x_1^2 % {} ~ \\", "'\"<>&", "ü–日本" * 40, "12345", None)


def test_texts_from_a_results_file_are_drawn_literally(tmp_path):
    """A $ in a GPU name or a call would start mathtext (and end plot with a parse error): drawn as written. The
    truth table of two calls (one of them renamed) is enough to render both texts."""
    name, call = "GPU $\\bad{$ <&>", "cudaFree $x$ \\{"
    records = [{**row, "gpu_name": name, "call": call if row["call"] == "cudaFree" else row["call"]}
               for row in synthetic.blocking_records() if row["call"] in ("cudaFree", "cudaMalloc")]
    plots.plot_results(synthetic.frame(records), tmp_path, synthetic.views(), formats=("svg",))
    svg = (tmp_path / "blocking_truth_table.svg").read_text()
    assert "GPU $\\bad{$ &lt;&amp;&gt;" in svg and "cudaFree $x$ \\{" in svg


@pytest.mark.parametrize("value", HOSTILE)
def test_every_view_draws_or_leaves_out_rows_whose_texts_were_altered(value):
    """Every string column of every experiment's rows (but the experiment and status) holding ``value``: each view
    draws what it can, and no figure is left out for a crash (drawn, not rendered: the $ is rendered above)."""
    keep = {"experiment", "status"}
    records = [{**row, **{column: value for column, cell in row.items() if isinstance(cell, str) and column not in keep}}
               for row in synthetic.all_records()]
    skipped = []
    for _, group in selection.by_gpu(synthetic.frame(records)):
        for _, _, figure in plots.draw(group, {}, synthetic.views(), skipped.append):
            plots.pyplot().close(figure)
    assert skipped == []


@pytest.mark.parametrize(("experiment", "column"), [("batched", "host_memory"), ("peer", "method"),
                                                    ("overlap", "host_memory"), ("library", "library")])
def test_a_category_bench_does_not_know_is_left_out(experiment, column):
    records = [{**row, column: "from-another-version"} for row in synthetic.records(experiment)]
    skipped = []
    for _, _, figure in plots.draw(synthetic.frame(records), {}, synthetic.views(), skipped.append):
        plots.pyplot().close(figure)
    assert skipped == []


def test_a_view_that_fails_loses_its_figure_only_and_says_why():
    def broken(rows, tables):
        plots.pyplot().figure()  # a figure half made, then the failure
        raise KeyError("verdict")

    view = views.View("launch", views.counts, figures=(broken,))
    rows = synthetic.frame(synthetic.launch_records() + synthetic.alloc_records())
    skipped = []
    drawn = []
    for _, stem, figure in plots.draw(rows, {}, {**synthetic.views(), "launch": view}, skipped.append):
        drawn.append(stem)
        plots.pyplot().close(figure)
    assert "alloc" in drawn and "launch" not in drawn
    assert skipped == ["left out broken of Test GPU (GPU-00000000): its rows cannot be drawn (KeyError: 'verdict')"]
    assert plots.pyplot().get_fignums() == []


def test_plot_writes_every_figure_or_none(tmp_path, monkeypatch):
    """A figure that fails to render after others rendered: the output directory is as it was, no staging left.
    Three figures (latency, roundtrip, then launch), each format's bytes its name: the files, not the pixels, count."""
    rows = synthetic.frame(synthetic.latency_records() + synthetic.roundtrip_records() + synthetic.launch_records())
    out = tmp_path / "plots"
    out.mkdir()
    (out / "launch.png").write_bytes(b"an older figure")
    calls = []

    def failing(figure, fmt, dpi=plots.DPI):
        calls.append(fmt)
        if len(calls) == 5:
            raise RuntimeError("the disk went away")
        return fmt.encode()

    monkeypatch.setattr(plots, "render", failing)
    with pytest.raises(RuntimeError):
        plots.plot_results(rows, out, synthetic.views())
    assert calls == ["png", "svg"] * 2 + ["png"]  # the third figure's PNG failed
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["launch.png", "plots"]
    assert (out / "launch.png").read_bytes() == b"an older figure"
    monkeypatch.setattr(plots, "render", lambda figure, fmt, dpi=plots.DPI: fmt.encode())
    assert len(plots.plot_results(rows, out, synthetic.views(), force=True)) == 6  # the older one is not bench's
    assert (out / "launch.png").read_bytes() == b"png"



def test_plot_and_report_draw_a_file_with_dollars_and_unknown_categories(tmp_path, capsys):
    """The issue's file: a $ in the GPU name, batched rows of a host memory batched never measures (device);
    plot and report end normally."""
    from bench import cli

    rows = synthetic.tagged(synthetic.launch_records() + [{**row, "host_memory": "device"}
                                                         for row in synthetic.batched_records()],
                            gpu_name="GPU $\\bad{$")
    synthetic.write(tmp_path / "r.parquet", rows)
    assert cli.main(["plot", str(tmp_path / "r.parquet"), "--out", str(tmp_path / "figures")]) == 0
    assert cli.main(["report", str(tmp_path / "r.parquet"), "--out", str(tmp_path / "r.html")]) == 0
    assert capsys.readouterr().err == ""
    assert sorted(path.name for path in (tmp_path / "figures").iterdir()) == ["launch.png", "launch.svg"]
    assert "GPU $\\bad{$" in (tmp_path / "figures" / "launch.svg").read_text()
