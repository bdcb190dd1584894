import matplotlib.image

from bench import plots
from bench.experiments.bandwidth import headline
from synthetic import bandwidth_rows


def test_bandwidth_plot_from_synthetic_frame(tmp_path):
    paths = plots.plot_results(bandwidth_rows(failed=2), tmp_path)
    assert [p.name for p in paths] == ["bandwidth.png", "bandwidth.svg"]
    height, width, _ = matplotlib.image.imread(paths[0]).shape
    assert width > 1500 and height > 700
    svg = paths[1].read_text()
    assert "PCIe Gen5 x16 theoretical, one direction (63.0 GB/s)" in svg
    assert "source + destination = L2 (63 MB)" in svg
    assert "2 configuration(s) failed" in svg and "H2D pinned" in svg and "D2D device" in svg


def test_plot_ignores_unknown_experiments(tmp_path):
    rows = bandwidth_rows()
    rows["experiment"] = "something-else"
    assert plots.plot_results(rows, tmp_path) == []


def test_headline():
    table = headline(bandwidth_rows())
    pinned_h2d = table[(table["direction"] == "H2D") & (table["host memory"] == "pinned")].iloc[0]
    assert pinned_h2d["peak at"] == "1 GiB" and float(pinned_h2d["peak GB/s"]) > 54
    assert float(pinned_h2d["GB/s at 16 MiB"]) < float(pinned_h2d["peak GB/s"])
    assert len(table) == 10


def test_overlap_figures_from_synthetic_frame(tmp_path):
    from synthetic import overlap_rows, overlap_timeline

    rows = overlap_rows()
    paths = plots.plot_results(rows, tmp_path, {"timeline": overlap_timeline(rows)})
    assert sorted(p.name for p in paths) == sorted(
        f"overlap_{kind}.{ext}" for kind in ("scaling", "heatmap", "timeline") for ext in ("png", "svg"))
    scaling = (tmp_path / "overlap_scaling.svg").read_text()
    assert "pinned, 4 chunks/stream" in scaling and "90% of bound" in scaling
    assert "makespan" in (tmp_path / "overlap_timeline.svg").read_text()


def test_overlap_figures_without_timeline(tmp_path):
    from synthetic import overlap_rows

    names = {p.name for p in plots.plot_results(overlap_rows(), tmp_path)}
    assert "overlap_scaling.png" in names and "overlap_timeline.png" not in names
