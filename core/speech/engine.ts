/**
 * The speech engine's contract as Mindloop calls it: the activities the Python worker
 * registers on `speech-gpu` / `speech-cpu` (by name, JSON in snake_case), the failures it
 * reports for input it refuses, and how long a text takes to say. Pure: the speech workflow,
 * its activities and the CLI share it.
 */
import { z } from 'zod';

export interface EngineTranscribeInput {
  audio_path: string;
  language?: string;
  word_timestamps?: boolean;
}
interface EngineWord {
  word: string;
  start: number;
  end: number;
  probability: number;
}
export interface EngineTranscribeResult {
  text: string;
  language: string;
  language_probability: number;
  duration_s: number;
  words: EngineWord[];
  confidence: number;
  backend: string;
  device: string;
  model: string;
  elapsed_ms: number;
  rtf: number;
}
export interface EngineSpeakInput {
  text: string;
  lang?: string;
  voice?: string;
  out_path: string;
}
export interface EngineSpeakResult {
  audio_path: string;
  duration_s: number;
  sample_rate: number;
  lang: string;
  voice: string;
  backend: string;
  device: string;
  elapsed_ms: number;
  rtf: number;
}

/** What the engine's activities look like to a workflow's proxy (names are the engine's; it also has `speech_health`). */
export interface EngineActivities {
  transcribe(input: EngineTranscribeInput): Promise<EngineTranscribeResult>;
  speak(input: EngineSpeakInput): Promise<EngineSpeakResult>;
}

/**
 * Failure types of input the engine (or the TS check before it) refuses. They are never retried
 * and end the speech job with the problem named; anything else is an outage, waited out.
 */
export const speechInputErrors = [
  'NotAudio',
  'EmptyAudio',
  'AudioTooLong',
  'UnsupportedSampleRate',
  'UnsupportedLanguage',
  'BadInput',
] as const;
export type SpeechInputError = (typeof speechInputErrors)[number];

export function isSpeechInputError(type: string | undefined): type is SpeechInputError {
  return (speechInputErrors as readonly string[]).includes(type ?? '');
}

/** A language: `auto` (transcription only) or an ISO 639 code (`en`, `de`, `yue`). */
export const speechLanguageSchema = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^(auto|[a-z]{2,3})$/, 'a language code like "en" or "de" (or "auto")');

/** Longest text one `speak` says. */
export const maxSpeakChars = 2000;

/**
 * Seconds a text takes to say, at most: speech runs at about 14 characters a second, so 10 a
 * second and two seconds of lead and tail bound what an engine produces. It is what a `speak`
 * holds of the agent's lifeforce before the engine says how long the audio really is.
 */
export function speakSecondsBound(text: string): number {
  return Math.ceil(2 + [...text.trim()].length / 10);
}
