"""What the experiments' figures show, drawn from synthetic rows through ``plots.plot_results``."""

import matplotlib.image

import synthetic
from bench import plots


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


def test_overlap_figures(tmp_path):
    rows = synthetic.overlap_rows()
    paths = plots.plot_results(rows, tmp_path, synthetic.views(), {"timeline": synthetic.overlap_timeline(rows)})
    assert sorted(p.name for p in paths) == sorted(
        f"overlap_{kind}.{ext}" for kind in ("scaling", "heatmap", "timeline") for ext in ("png", "svg"))
    scaling = (tmp_path / "overlap_scaling.svg").read_text()
    assert "pinned, 4 chunks/stream" in scaling and "90% of bound" in scaling
    assert "makespan" in (tmp_path / "overlap_timeline.svg").read_text()


def test_overlap_figures_without_a_timeline(tmp_path):
    names = {p.name for p in plots.plot_results(synthetic.overlap_rows(), tmp_path, synthetic.views())}
    assert "overlap_scaling.png" in names and "overlap_timeline.png" not in names


def test_truth_table_alloc_and_launch_figures(tmp_path):
    rows = synthetic.frame(synthetic.blocking_records() + synthetic.alloc_records() + synthetic.graphs_records()
                           + synthetic.launch_records())
    paths = plots.plot_results(rows, tmp_path, synthetic.views())
    names = sorted(path.name for path in paths)
    assert names == sorted(f"{stem}.{ext}" for stem in ("blocking_truth_table", "alloc", "launch")
                           for ext in ("png", "svg"))  # one truth table for blocking and serialization
    truth = (tmp_path / "blocking_truth_table.svg").read_text()
    assert "cudaGetLastError" in truth and "waits-for-device" in truth and "serializes" in truth
    height, width, _ = matplotlib.image.imread(tmp_path / "blocking_truth_table.png").shape
    assert width > 1500 and height > 700
    assert "cudaMallocAsync, release threshold max" in (tmp_path / "alloc.svg").read_text()
    assert "dispatcher" in (tmp_path / "launch.svg").read_text()
