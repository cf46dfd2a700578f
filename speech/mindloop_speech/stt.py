"""Speech-to-text with faster-whisper and the multilingual Whisper base model.

The model loads once per worker and serves every request: int8 on CPU, float16 on CUDA. The
language is detected from the first 30 s when the caller asks for `auto`.

Whisper's encoder always reads a 30 s window (shorter audio is padded), and on a CPU it is most
of the cost of a short clip. faster-whisper's own detection encodes the first window once to
detect and again to transcribe; here detection encodes the very window transcription starts
with, and a one-entry cache per thread hands that encoding to the transcription, so a clip of up
to 30 s is encoded once.
"""
from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .audio import TARGET_RATE, Cancelled, decode, probe
from .errors import EMPTY_AUDIO, UNSUPPORTED_LANGUAGE, SpeechInputError, bad_input
from .models import WHISPER_MODEL_NAME, assemble_whisper

log = logging.getLogger("mindloop_speech.stt")


def whisper_languages() -> tuple[str, ...]:
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    return tuple(_LANGUAGE_CODES)


def normalise_language(value: Any, field_name: str = "language") -> str | None:
    """'auto' or absent → None; 'de-DE' / 'en_US' / 'EN' → the primary subtag, lower case."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise bad_input(f"{field_name} must be a non-empty string such as 'auto', 'en' or 'de'")
    code = value.strip().replace("_", "-").split("-")[0].lower()
    return None if code == "auto" else code


@dataclass
class Progress:
    """What the heartbeat reports: the stage and how far into the audio the work has got."""

    stage: str = "queued"
    position_s: float = 0.0
    duration_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stage": self.stage, "position_s": round(self.position_s, 2)}
        if self.duration_s is not None:
            out["duration_s"] = round(self.duration_s, 2)
        out.update(self.extra)
        return out


class WhisperEngine:
    backend = "faster-whisper"

    def __init__(self, device: str, model_dir: Path | None = None, cpu_threads: int = 0) -> None:
        from faster_whisper import WhisperModel

        self.device = device
        self.compute_type = "float16" if device == "cuda" else "int8"
        self.model_name = WHISPER_MODEL_NAME
        path = assemble_whisper(model_dir, log=log.info)
        started = time.monotonic()
        self.model = WhisperModel(str(path), device=device, compute_type=self.compute_type, cpu_threads=cpu_threads)
        self._encoded = threading.local()
        self._encode = self.model.encode
        self.model.encode = self._encode_once  # type: ignore[method-assign]
        self.languages = whisper_languages()
        log.info("loaded %s from %s on %s (%s) in %.1f s", self.model_name, path, device, self.compute_type, time.monotonic() - started)

    def _encode_once(self, features: Any) -> Any:
        """The model's encoder, remembering its last window on this thread (see the module's note)."""
        import numpy as np

        key = (features.shape, hashlib.blake2b(np.ascontiguousarray(features).tobytes(), digest_size=16).digest())
        last = getattr(self._encoded, "last", None)
        if last is not None and last[0] == key:
            return last[1]
        out = self._encode(features)
        self._encoded.last = (key, out)
        return out

    def detect_language(self, audio: Any) -> tuple[str, float]:
        """The language of the first window, from the same encoding the transcription will use."""
        from faster_whisper.audio import pad_or_trim

        extractor = self.model.feature_extractor
        features = extractor(audio)
        content_frames = features.shape[-1] - 1
        window = pad_or_trim(features[:, : min(extractor.nb_max_frames, content_frames)])
        best_token, probability = self.model.model.detect_language(self.model.encode(window))[0][0]
        return best_token[2:-2], float(probability)

    def check_language(self, language: str | None) -> None:
        if language is not None and language not in self.languages:
            raise SpeechInputError(
                UNSUPPORTED_LANGUAGE,
                f"'{language}' is not a language Whisper knows; use 'auto' or one of: {', '.join(self.languages)}",
                language=language,
                supported=list(self.languages),
            )

    def transcribe(
        self,
        audio_path: Path,
        language: str | None,
        word_timestamps: bool,
        cancelled: threading.Event,
        progress: Progress,
    ) -> dict[str, Any]:
        started = time.monotonic()
        self.check_language(language)
        progress.stage = "probing"
        info = probe(audio_path)
        progress.duration_s = info.duration_s
        progress.stage = "decoding"

        def decoded(seconds: float) -> None:
            progress.position_s = seconds

        audio = decode(info, cancelled, decoded)
        duration = audio.size / TARGET_RATE
        progress.duration_s = duration
        progress.position_s = 0.0
        progress.stage = "transcribing"
        language_probability = 1.0
        if language is None:
            progress.stage = "detecting language"
            language, language_probability = self.detect_language(audio)
            progress.stage = "transcribing"
        segments, meta = self.model.transcribe(audio, language=language, word_timestamps=word_timestamps, beam_size=5)
        progress.extra["language"] = meta.language
        texts: list[str] = []
        words: list[dict[str, Any]] = []
        segment_confidences: list[float] = []
        # The segments come from a generator that decodes as it is iterated: the cancellation
        # check between segments is what makes a long transcription stop soon after a cancel.
        for seg in segments:
            if cancelled.is_set():
                raise Cancelled()
            texts.append(seg.text)
            progress.position_s = float(seg.end)
            segment_confidences.append(float(2.718281828459045 ** seg.avg_logprob))
            for w in seg.words or []:
                words.append({"word": w.word.strip(), "start": round(float(w.start), 3), "end": round(float(w.end), 3), "probability": round(float(w.probability), 4)})
        if words:
            confidence = sum(w["probability"] for w in words) / len(words)
        elif segment_confidences:
            confidence = sum(segment_confidences) / len(segment_confidences)
        else:
            confidence = 0.0
        self._encoded.last = None
        text = "".join(texts).strip()
        # Noise, music or a cough is loud enough to pass the silence check, and Whisper hears
        # punctuation in it (". . ."): a transcription without a single word is no speech.
        if not re.search(r"\w", text):
            raise SpeechInputError(EMPTY_AUDIO, f"no speech heard in {duration:.1f} s of audio (it is loud enough, but no words came out of it)", duration_s=round(duration, 3), heard=text)
        elapsed = time.monotonic() - started
        return {
            "text": text,
            "language": meta.language,
            "language_probability": round(language_probability, 4),
            "duration_s": round(duration, 3),
            "words": words,
            "confidence": round(confidence, 4),
            "backend": self.backend,
            "device": self.device,
            "model": self.model_name,
            "elapsed_ms": round(elapsed * 1000),
            "rtf": round(elapsed / duration, 4) if duration > 0 else None,
        }
