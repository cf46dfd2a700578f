"""Reading audio files for speech-to-text: checks first, then decoding to 16 kHz mono.

Checks in order, each before any expensive work: the file exists and is a regular file
(BadInput), it opens as a container with an audio stream (NotAudio), its sample rate lies in
8-48 kHz (UnsupportedSampleRate), the duration the container states is at most 30 minutes
(AudioTooLong) and at least 0.1 s (EmptyAudio). Decoding then enforces the same bounds on the
samples actually there, since a header may state no duration or a false one, and rejects audio
with no 30 ms frame louder than -55 dBFS as silence only (EmptyAudio).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import av
import numpy as np

from .errors import (
    AUDIO_TOO_LONG,
    EMPTY_AUDIO,
    NOT_AUDIO,
    UNSUPPORTED_SAMPLE_RATE,
    SpeechInputError,
    bad_input,
)

MIN_SAMPLE_RATE = 8_000
MAX_SAMPLE_RATE = 48_000
MAX_DURATION_S = 30 * 60
MIN_DURATION_S = 0.1
TARGET_RATE = 16_000  # what Whisper consumes
SILENCE_DBFS = -55.0
FRAME_S = 0.03


class Cancelled(Exception):
    """The activity was cancelled while this thread worked; it stops at the next check."""


@dataclass
class Probe:
    path: Path
    format: str
    codec: str
    sample_rate: int
    channels: int
    duration_s: float | None  # as the container states it; None when it states none


def _fmt_duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.2f} s"


def probe(path: Path) -> Probe:
    if not path.exists():
        raise bad_input(f"audio_path does not exist: {path}", audio_path=str(path))
    if not path.is_file():
        raise bad_input(f"audio_path is not a regular file: {path}", audio_path=str(path))
    try:
        container = av.open(str(path), metadata_errors="ignore")
    except (av.error.FFmpegError, ValueError, OSError) as err:
        raise SpeechInputError(NOT_AUDIO, f"{path.name} is not decodable audio ({err.__class__.__name__}: {err})", audio_path=str(path)) from err
    try:
        if not container.streams.audio:
            raise SpeechInputError(NOT_AUDIO, f"{path.name} has no audio stream (container {container.format.name})", audio_path=str(path))
        stream = container.streams.audio[0]
        rate = int(stream.codec_context.sample_rate or stream.rate or 0)
        duration: float | None = None
        if stream.duration is not None and stream.time_base is not None:
            duration = float(stream.duration * stream.time_base)
        elif container.duration is not None:
            duration = container.duration / av.time_base
        result = Probe(path, container.format.name, stream.codec_context.name, rate, int(stream.codec_context.channels or 0), duration)
    finally:
        container.close()
    check_rate(result.sample_rate, path)
    if result.duration_s is not None:
        check_duration(result.duration_s, path)
    return result


def check_rate(rate: int, path: Path) -> None:
    if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise SpeechInputError(
            UNSUPPORTED_SAMPLE_RATE,
            f"{path.name} is sampled at {rate} Hz; supported: {MIN_SAMPLE_RATE}-{MAX_SAMPLE_RATE} Hz",
            sample_rate=rate,
            min_hz=MIN_SAMPLE_RATE,
            max_hz=MAX_SAMPLE_RATE,
        )


def check_duration(seconds: float, path: Path) -> None:
    if seconds > MAX_DURATION_S:
        raise SpeechInputError(
            AUDIO_TOO_LONG,
            f"{path.name} lasts {_fmt_duration(seconds)}; the limit is {MAX_DURATION_S // 60} min (split it into parts)",
            duration_s=round(seconds, 3),
            limit_s=MAX_DURATION_S,
        )
    if seconds < MIN_DURATION_S:
        raise SpeechInputError(
            EMPTY_AUDIO,
            f"{path.name} holds {seconds:.3f} s of audio; at least {MIN_DURATION_S} s is needed",
            duration_s=round(seconds, 3),
        )


def decode(
    info: Probe,
    cancelled: threading.Event,
    progress: Callable[[float], None] = lambda s: None,
) -> np.ndarray:
    """The whole file as 16 kHz mono float32 in [-1, 1]; raises the input errors above."""
    limit = int((MAX_DURATION_S + 1) * TARGET_RATE)
    chunks: list[np.ndarray] = []
    total = 0
    try:
        with av.open(str(info.path), metadata_errors="ignore") as container:
            stream = container.streams.audio[0]
            resampler = av.AudioResampler(format="s16", layout="mono", rate=TARGET_RATE)

            def take(frames) -> None:
                nonlocal total
                for out in frames:
                    data = out.to_ndarray().reshape(-1)
                    chunks.append(data)
                    total += data.size

            for frame in container.decode(stream):
                if cancelled.is_set():
                    raise Cancelled()
                take(resampler.resample(frame))
                if total > limit:
                    check_duration(total / TARGET_RATE, info.path)
                progress(total / TARGET_RATE)
            take(resampler.resample(None))
    except (av.error.FFmpegError, ValueError) as err:
        raise SpeechInputError(NOT_AUDIO, f"{info.path.name} could not be decoded ({err.__class__.__name__}: {err})", audio_path=str(info.path)) from err
    audio = (np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)).astype(np.float32) / 32768.0
    check_duration(audio.size / TARGET_RATE, info.path)
    if is_silent(audio):
        raise SpeechInputError(
            EMPTY_AUDIO,
            f"{info.path.name} contains only silence ({audio.size / TARGET_RATE:.1f} s, nothing louder than {SILENCE_DBFS:.0f} dBFS)",
            duration_s=round(audio.size / TARGET_RATE, 3),
        )
    return audio


def is_silent(audio: np.ndarray, rate: int = TARGET_RATE) -> bool:
    frame = int(FRAME_S * rate)
    usable = (audio.size // frame) * frame
    if usable == 0:
        return True
    rms = np.sqrt(np.mean(np.square(audio[:usable].reshape(-1, frame), dtype=np.float64), axis=1))
    threshold = 10 ** (SILENCE_DBFS / 20)
    return bool(np.max(rms) < threshold)
