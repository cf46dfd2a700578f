/**
 * Word error rate: how far a transcript is from the words that were said. Pure, no
 * dependencies, so tests, benchmarks and workflows can all score speech.
 *
 * Both texts are normalised first, because a transcript that writes "7" for "seven" or
 * "Don't" for "don't" heard the words right: lower case (German ß as ss), digits spelled out
 * as words in the text's language (English or German; a number goes digit by digit past
 * 999 999), and punctuation dropped. An apostrophe inside a word joins it ("don't" → "dont");
 * any other mark (hyphens included) separates words, so "twenty-one" and "21" agree. The
 * rate is the word-level edit distance (substitutions + deletions + insertions) divided by the
 * number of reference words.
 */

export type WerLanguage = 'en' | 'de';

interface WerResult {
  /** (substitutions + deletions + insertions) / reference words; 0 for two empty texts, 1 per word for an empty reference. */
  wer: number;
  substitutions: number;
  deletions: number;
  insertions: number;
  referenceWords: number;
  hypothesisWords: number;
}

const enOnes = [
  'zero',
  'one',
  'two',
  'three',
  'four',
  'five',
  'six',
  'seven',
  'eight',
  'nine',
  'ten',
  'eleven',
  'twelve',
  'thirteen',
  'fourteen',
  'fifteen',
  'sixteen',
  'seventeen',
  'eighteen',
  'nineteen',
];
const enTens = ['', '', 'twenty', 'thirty', 'forty', 'fifty', 'sixty', 'seventy', 'eighty', 'ninety'];
const deOnes = [
  'null',
  'eins',
  'zwei',
  'drei',
  'vier',
  'fünf',
  'sechs',
  'sieben',
  'acht',
  'neun',
  'zehn',
  'elf',
  'zwölf',
  'dreizehn',
  'vierzehn',
  'fünfzehn',
  'sechzehn',
  'siebzehn',
  'achtzehn',
  'neunzehn',
];
const deTens = ['', '', 'zwanzig', 'dreißig', 'vierzig', 'fünfzig', 'sechzig', 'siebzig', 'achtzig', 'neunzig'];

/** 0 ≤ n < 1000 in English words, e.g. 342 → "three hundred forty two". */
function enBelowThousand(n: number): string[] {
  const out: string[] = [];
  const hundreds = Math.floor(n / 100);
  const rest = n % 100;
  if (hundreds > 0) out.push(enOnes[hundreds]!, 'hundred');
  if (rest === 0) return out.length > 0 ? out : ['zero'];
  if (rest < 20) out.push(enOnes[rest]!);
  else {
    out.push(enTens[Math.floor(rest / 10)]!);
    if (rest % 10 > 0) out.push(enOnes[rest % 10]!);
  }
  return out;
}

function enNumber(n: number): string[] {
  if (n < 1000) return enBelowThousand(n);
  const thousands = Math.floor(n / 1000);
  const rest = n % 1000;
  return [...enBelowThousand(thousands), 'thousand', ...(rest > 0 ? enBelowThousand(rest) : [])];
}

/** 0 ≤ n < 1000 as one German word, e.g. 21 → "einundzwanzig", 101 → "einhunderteins". */
function deBelowThousand(n: number): string {
  const hundreds = Math.floor(n / 100);
  const rest = n % 100;
  let word = hundreds > 0 ? `${hundreds === 1 ? 'ein' : deOnes[hundreds]!}hundert` : '';
  if (rest === 0) return word || 'null';
  if (rest < 20) word += deOnes[rest]!;
  else {
    const unit = rest % 10;
    word += `${unit > 0 ? `${unit === 1 ? 'ein' : deOnes[unit]!}und` : ''}${deTens[Math.floor(rest / 10)]!}`;
  }
  return word;
}

function deNumber(n: number): string[] {
  if (n < 1000) return [deBelowThousand(n)];
  const thousands = Math.floor(n / 1000);
  const rest = n % 1000;
  const head = thousands === 1 ? 'ein' : deBelowThousand(thousands);
  return [`${head}tausend${rest > 0 ? deBelowThousand(rest) : ''}`];
}

/** A run of digits as words: the number below a million, else digit by digit. */
function spellDigits(digits: string, lang: WerLanguage): string[] {
  const spell = lang === 'de' ? deNumber : enNumber;
  // A leading zero ("007") is read digit by digit, as people say it.
  if (digits.length > 6 || (digits.length > 1 && digits.startsWith('0')))
    return [...digits].flatMap((d) => spell(Number(d)));
  return spell(Number(digits));
}

/** The words of `text` as WER compares them (see the module comment). */
export function normaliseForWer(text: string, lang: WerLanguage = 'en'): string[] {
  const lowered = text.normalize('NFC').toLowerCase().replace(/ß/g, 'ss');
  // Apostrophes inside words join; every other non-letter, non-digit separates.
  const joined = lowered.replace(/(\p{L})['’](\p{L})/gu, '$1$2');
  const words: string[] = [];
  for (const token of joined.split(/[^\p{L}\p{N}]+/u)) {
    if (!token) continue;
    // Digits glued to letters ("3rd", "10km") are split so the digits can be spelled.
    for (const part of token.match(/\p{N}+|\p{L}+/gu) ?? []) {
      if (/^[0-9]+$/.test(part)) words.push(...spellDigits(part, lang).map((w) => w.replace(/ß/g, 'ss')));
      else words.push(part);
    }
  }
  return words;
}

/** Word-level Levenshtein alignment counts between two word lists. */
export function alignWords(reference: readonly string[], hypothesis: readonly string[]): Omit<WerResult, 'wer'> {
  const n = reference.length;
  const m = hypothesis.length;
  // cost[j], with the edit counts that reached it, over one row at a time.
  type Cell = { cost: number; s: number; d: number; i: number };
  let prev: Cell[] = Array.from({ length: m + 1 }, (_, j) => ({ cost: j, s: 0, d: 0, i: j }));
  for (let r = 1; r <= n; r++) {
    const row: Cell[] = [{ cost: r, s: 0, d: r, i: 0 }];
    for (let h = 1; h <= m; h++) {
      const same = reference[r - 1] === hypothesis[h - 1];
      const diag = prev[h - 1]!;
      const up = prev[h]!;
      const left = row[h - 1]!;
      const sub = { cost: diag.cost + (same ? 0 : 1), s: diag.s + (same ? 0 : 1), d: diag.d, i: diag.i };
      const del = { cost: up.cost + 1, s: up.s, d: up.d + 1, i: up.i };
      const ins = { cost: left.cost + 1, s: left.s, d: left.d, i: left.i + 1 };
      // Ties prefer the substitution/match, then a deletion: a stable, conventional alignment.
      row.push(sub.cost <= del.cost && sub.cost <= ins.cost ? sub : del.cost <= ins.cost ? del : ins);
    }
    prev = row;
  }
  const last = prev[m]!;
  return { substitutions: last.s, deletions: last.d, insertions: last.i, referenceWords: n, hypothesisWords: m };
}

/** The word error rate of `hypothesis` against `reference`, both normalised for `lang`. */
export function wordErrorRate(reference: string, hypothesis: string, lang: WerLanguage = 'en'): WerResult {
  const counts = alignWords(normaliseForWer(reference, lang), normaliseForWer(hypothesis, lang));
  const errors = counts.substitutions + counts.deletions + counts.insertions;
  const wer =
    counts.referenceWords === 0
      ? counts.hypothesisWords === 0
        ? 0
        : counts.hypothesisWords
      : errors / counts.referenceWords;
  return { wer, ...counts };
}

/** The rate over many pairs: all their errors over all their reference words (not the mean of the rates). */
export function corpusWordErrorRate(
  pairs: readonly { reference: string; hypothesis: string }[],
  lang: WerLanguage = 'en',
): WerResult {
  const total = { substitutions: 0, deletions: 0, insertions: 0, referenceWords: 0, hypothesisWords: 0 };
  for (const p of pairs) {
    const c = alignWords(normaliseForWer(p.reference, lang), normaliseForWer(p.hypothesis, lang));
    total.substitutions += c.substitutions;
    total.deletions += c.deletions;
    total.insertions += c.insertions;
    total.referenceWords += c.referenceWords;
    total.hypothesisWords += c.hypothesisWords;
  }
  const errors = total.substitutions + total.deletions + total.insertions;
  return {
    wer:
      total.referenceWords === 0
        ? total.hypothesisWords === 0
          ? 0
          : total.hypothesisWords
        : errors / total.referenceWords,
    ...total,
  };
}
