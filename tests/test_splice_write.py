"""`qwengpu bench-splice --machine tiny --write`: the spliced checkpoint written, loaded whole by
stock transformers and run. Its own module: it writes GiBs, and test_splice_machine's fixtures
(more GiBs) are removed before it runs (`module_tmp`)."""
from qwengpu.splice import fixtures
from qwengpu.splice.machine_splice import fitting_text_config

V = 416


def test_machine_splice_benchmark_writes_and_runs_the_whole_checkpoint(tmp_path):
    """`qwengpu bench-splice --machine tiny --write` on a small base (the grouped
    geometry: its checkpoint is half the size of the 2B-like one, for CI's disk): the spliced checkpoint is
    written, loaded whole by stock transformers (fp32) and runs dot through every layer, base and
    GPU, exactly, with its size, load time and peak memory reported."""
    from qwengpu.splice.bench import bench_splice_machine, print_machine_figures
    f = bench_splice_machine("tiny", str(tmp_path), kernels=("dot",), log=lambda *a, **k: None, base_throughput=False,
                             text_config=fitting_text_config("tiny", V, grouped=True), vision_config=fixtures.tiny_vision_config(),
                             write=True, threads=(1,))
    w = f["written"]
    assert (tmp_path / "spliced" / "config.json").exists() and w["bytes"] > 1e8
    (load,) = w["loads"]
    assert load["class"] == "Qwen3_5ForCausalLM" and load["layers"] == f["build"]["gpu_layers"] + 4
    assert [(r["kernel"], r["exact"]) for r in load["runs"]] == [("dot", True)]
    assert load["peak_rss_bytes"] > 0 and load["load_s"] > 0 and "stock" not in f
    print_machine_figures(f)
