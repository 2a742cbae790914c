"""Fuzz one reader with atheris (libFuzzer, coverage-guided), in this process:

    python tests/fuzz/harness.py READER --seconds N --corpus DIR [--artifacts DIR] [-- FLAGS]

READER is one of tests/fuzz/readers.py's READERS. The corpus folder is seeded first when it is
empty (tests/fuzz/seeds.py, in a subprocess, so that what the seeds import is instrumented
here). libFuzzer adds to it every input that reaches new code, and writes an input that crashes
the reader (an exception other than its allowed errors), runs longer than the reader's timeout
or grows the process past the memory limit into the artifacts folder (crash-, timeout- or
oom-<sha1>), then stops. `tests/fuzz/run.py` (`nox -s fuzz`) runs every reader this way, moves
what they find to tests/fuzz/regressions/ and prints executions and coverage per reader.
FLAGS after `--` go to libFuzzer as they are (e.g. -runs=1000, -jobs=2).
"""

from __future__ import annotations

import argparse
import importlib
import resource
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))

RSS_LIMIT_MB = 2048  # libFuzzer's: an input that grows the process past it is an oom- failure
# Closer: an input (64 KiB at most) that raises the process's peak memory by more than this is
# a crash: a reader that allocates thousands of times its input (each of many references to
# one long string copied, say) would take gigabytes from a file of a few MiB.
GROWTH_LIMIT_MB = 128
# A single allocation larger than this fails at once with MemoryError (a crash of the reader)
# instead of taking the machine's memory first.
ADDRESS_SPACE_LIMIT = 8 << 30
INSTRUMENTED = ("ninfer_kits", "tarfile", "gzip", "tomllib")
IMPORTED = ("ninfer_kits.kit.buildinfo", "ninfer_kits.fetch.ledger",
            "ninfer_kits.inspector.archive", "ninfer_kits.inspector.elf",
            "ninfer_kits.inspector.floor", "ninfer_kits.release.checksums",
            "ninfer_kits.release.ledger", "ninfer_kits.inspector.linetable",
            "ninfer_kits.loader.ldcache", "tarfile", "gzip", "bz2",
            "lzma", "tomllib", "zlib")


def _dictionary(tokens: tuple[bytes, ...], path: Path) -> Path:
    """The tokens as a libFuzzer dictionary: one quoted string a line, \\xNN escapes."""
    def quoted(token: bytes) -> str:
        return "".join(chr(b) if 0x20 <= b < 0x7F and b not in b'"\\' else f"\\x{b:02x}"
                       for b in token)

    path.write_text("".join(f'"{quoted(token)}"\n' for token in tokens))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reader")
    parser.add_argument("--seconds", type=float, default=15,
                        help="how long to fuzz (libFuzzer's -max_total_time; at least 1)")
    parser.add_argument("--corpus", type=Path, default=None,
                        help="the corpus folder (default .cache/fuzz/corpus/READER)")
    parser.add_argument("--artifacts", type=Path, default=None,
                        help="where failing inputs go (default .cache/fuzz/artifacts/READER)")
    parser.add_argument("libfuzzer", nargs="*", help="flags for libFuzzer, after --")
    args = parser.parse_args()

    import atheris

    # Instrument the project and the standard library parsers the readers hand bytes to (tar,
    # gzip, TOML; bz2 and lzma wrap C code), so that the fuzzer is guided through them too, and
    # let string comparisons guide the mutator. (atheris's RegEx hook is left off: its pattern
    # proxy takes no `pos` argument, which tomllib passes.) Everything the readers use is
    # imported here, before any input runs.
    atheris.enabled_hooks.add("str")
    with atheris.instrument_imports(include=list(INSTRUMENTED)):
        from fuzz.readers import READERS, Unexpected, replay, scratch_folder

        for module in IMPORTED:
            importlib.import_module(module)

    if args.reader not in READERS:
        parser.error(f"unknown reader {args.reader!r} (one of {', '.join(READERS)})")
    reader = READERS[args.reader]
    cache = ROOT / ".cache" / "fuzz"
    corpus = args.corpus or cache / "corpus" / reader.name
    artifacts = args.artifacts or cache / "artifacts" / reader.name
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    if not any(corpus.iterdir()):
        subprocess.run([sys.executable, str(Path(__file__).with_name("seeds.py")), reader.name,
                        str(corpus)], check=True, stdout=subprocess.DEVNULL)

    scratch = scratch_folder()

    def test_one_input(data: bytes) -> None:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        replay(reader, data, scratch)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB
        if grown > GROWTH_LIMIT_MB << 10:
            raise Unexpected(f"one input of {len(data)} bytes grew the process by "
                             f"{grown >> 10} MiB (more than {GROWTH_LIMIT_MB})")

    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > ADDRESS_SPACE_LIMIT:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, hard))
    flags = [
        f"-max_total_time={max(1, round(args.seconds))}",
        f"-max_len={reader.max_len}",
        f"-timeout={reader.timeout}",
        f"-rss_limit_mb={RSS_LIMIT_MB}",
        f"-artifact_prefix={artifacts}/",
        f"-dict={_dictionary(reader.tokens, artifacts / 'tokens.dict')}",
        "-print_final_stats=1",
        "-use_value_profile=1",
        *args.libfuzzer,
    ]
    print(f"fuzzing {reader.name} ({reader.what}) for {args.seconds:g} s; corpus {corpus}",
          flush=True)
    atheris.Setup([sys.argv[0], *flags, str(corpus)], test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
