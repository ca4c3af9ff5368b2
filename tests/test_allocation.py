"""ctda's processes take memory as ctda/allocation.py says: numpy's transparent huge-page advice
off (unless the environment already decides), large blocks from glibc's heap, reused."""

from __future__ import annotations

import functools
import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctda.allocation import BLAS_ENV, ENV, json_bytes, warm_heap_for
from ctda.forking import usable_cpus

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="numpy advises huge pages on Linux only")

#: imports numpy first (as a notebook would), then asks; prints the variable and numpy's flag
PROBE = """
import os, sys, numpy
{call}
print(os.environ.get("{env}"), numpy._core.multiarray._set_madvise_hugepage(True))
"""


def _probe(call: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != ENV}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(call=call, env=ENV)],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout.strip().splitlines()[-1]


def test_small_pages_turns_the_advice_off_in_the_process_and_its_children() -> None:
    assert _probe("") == "None True"  # numpy's own default on a Linux kernel >= 4.6
    assert _probe("from ctda.allocation import small_pages; small_pages()") == "0 False"


def test_a_setting_in_the_environment_wins() -> None:
    assert _probe("from ctda.allocation import small_pages; small_pages()", **{ENV: "1"}) == "1 True"


#: the command line, run in the probe's process
CLI = """
import sys
sys.argv = ["ctda", "--version"]
from ctda.cli.app import main
try:
    main()
except SystemExit:
    pass
"""


def test_the_command_line_runs_with_small_pages() -> None:
    assert _probe(CLI) == "0 False"


#: frees a 64 MiB array, makes another, prints the page faults that took (4 KiB pages)
REUSE = """
import resource, numpy
{call}
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
a = numpy.ones(8 << 20)
del a
before = faults()
b = numpy.ones(8 << 20)
print(faults() - before)
"""


def _refaults(call: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", REUSE.format(call=call)],
        env={**os.environ, ENV: "0"},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return int(out.stdout.split()[-1])


def test_heap_blocks_reuse_freed_memory_without_faulting_it_in_again() -> None:
    # glibc maps a 64 MiB block anew (16,384 pages, each faulted at its first write)
    assert _refaults("") > 10_000
    assert _refaults("from ctda.allocation import heap_blocks\nassert heap_blocks()") < 1_000
    assert _refaults(CLI) < 1_000  # the command line sets it up


def _given_back(keep: bool) -> float:
    code = (
        "import numpy\n"
        "from ctda.allocation import heap_blocks\n"
        "from ctda.ingest.memory import keeping_freed, release_free_memory\n"
        "def rss():\n"
        "    return int(open('/proc/self/statm').read().split()[1]) * 4096 / 1e6\n"
        "assert heap_blocks()\n"
        "a = numpy.ones(16 << 20)\n"
        "del a\n"
        "before = rss()\n"
        + ("with keeping_freed():\n    release_free_memory()\n" if keep else "release_free_memory()\n")
        + "print(before - rss())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, ENV: "0"}, capture_output=True, text=True, check=True
    )
    return float(out.stdout.split()[-1])


def test_a_read_analysed_next_keeps_what_it_frees() -> None:
    # the heap keeps a freed 134 MB block (heap_blocks); the reader's release hands it back,
    # except for a read whose table is analysed next (api.analyze reads inside keeping_freed)
    assert _given_back(keep=False) > 100
    assert _given_back(keep=True) < 10


#: the same in a thread other than the main one
REUSE_IN_THREAD = """
import resource, threading, numpy
{call}
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def work():
    a = numpy.ones(12 << 20)
    del a
    before = faults()
    b = numpy.ones(12 << 20)
    print(faults() - before)
t = threading.Thread(target=work)
t.start()
t.join()
"""


def test_a_thread_reuses_freed_memory_too() -> None:
    # a 96 MiB block does not fit a thread arena's 64 MiB heap: mapped anew, unless every
    # thread takes memory from the main heap
    def refaults(call: str) -> int:
        code = REUSE_IN_THREAD.format(call=call)
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, ENV: "0"},
            capture_output=True,
            text=True,
            check=True,
        )
        return int(out.stdout.split()[-1])

    assert refaults("") > 10_000
    assert refaults("from ctda.allocation import heap_blocks\nassert heap_blocks()") < 1_000


#: warms 256 MiB of heap (when asked), then makes a 128 MiB array: its page faults
WARMED = """
import resource, numpy
from ctda.allocation import tune_memory, warm_heap
{call}
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
thread = warm_heap({size})
print(thread is not None)
if thread is not None:
    thread.join()
before = faults()
a = numpy.ones(16 << 20)
print(faults() - before)
"""


def _warmed(call: str, size: int) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", WARMED.format(call=call, size=size)],
        env={**os.environ, ENV: "0"},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    started, faults = out.stdout.split()[-2:]
    return started, int(faults)


@pytest.mark.skipif(usable_cpus() < 2, reason="one CPU: no core to warm the heap on")
def test_a_warmed_heap_serves_the_next_arrays_without_faults() -> None:
    # 32,768 pages for the array unwarmed; warmed, the heap hands out pages already touched
    started, cold = _warmed("tune_memory()", 0)
    assert (started, cold > 30_000) == ("False", True)
    started, warm = _warmed("tune_memory()", 256 << 20)
    assert (started, warm < 1_000) == ("True", True)
    # where glibc caps the threshold at 32 MiB (HEAP_BLOCKS' second), blocks still fit below it
    capped = "tune_memory()\nimport ctypes\nassert ctypes.CDLL(None).mallopt(-3, 32 << 20)"
    started, warm = _warmed(capped, 256 << 20)
    assert (started, warm < 1_000) == ("True", True)
    # untuned, glibc would trim what was freed at once: nothing is started
    assert _warmed("", 256 << 20)[0] == "False"


def test_warm_sizes_come_from_the_trace(tmp_path: Path) -> None:
    text = b'{"traceEvents": [' + b",".join(b'{"ph": "i", "ts": %d}' % i for i in range(5000)) + b"]}"
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    assert json_bytes(plain) == json_bytes(packed) == len(text)
    # a truncated gzip's last four bytes are not its size: capped at deflate's 1032:1
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(text)[:300] + b"\xff\xff\xff\x7f")
    assert json_bytes(cut) == 1032 * 304
    (tmp_path / "t.parquet").write_bytes(b"PAR1" + bytes(100))
    assert json_bytes(tmp_path / "t.parquet") == 0  # a table: not worth warming for
    assert json_bytes(tmp_path) == 0
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert json_bytes(fifo) == 0  # not opened: it would block
    with pytest.raises(FileNotFoundError):
        json_bytes(tmp_path / "missing.json")
    assert warm_heap_for(tmp_path / "missing.json") is None  # the command reports it


def test_no_blas_threads_unless_the_user_chose() -> None:
    code = "import os\nfrom ctda.allocation import tune_memory\ntune_memory()\nprint(os.environ.get('{0}'))"
    env = {k: v for k, v in os.environ.items() if k != BLAS_ENV}
    run = functools.partial(
        subprocess.run,
        [sys.executable, "-c", code.format(BLAS_ENV)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run(env=env).stdout.split()[-1] == "1"
    assert run(env={**env, BLAS_ENV: "4"}).stdout.split()[-1] == "4"


@pytest.mark.skipif(usable_cpus() < 2, reason="one CPU: no core to warm the heap on")
def test_a_read_analysed_next_warms_the_heap_for_the_analysis() -> None:
    code = (
        "from ctda.allocation import tune_memory\n"
        "from ctda.ingest.memory import keeping_freed, warm_for_analysis\n"
        "tune_memory()\n"
        "print(warm_for_analysis(64 << 20) is None)\n"
        "with keeping_freed():\n"
        "    thread = warm_for_analysis(64 << 20)\n"
        "print(thread is None)\n"
        "thread.join()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["True", "False"]  # a bare read warms nothing
