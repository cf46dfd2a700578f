/**
 * BERT's uncased WordPiece tokenizer, as Hugging Face's `tokenizers` runs it for all-MiniLM-L6-v2
 * (BertNormalizer with lowercasing and accent stripping, BertPreTokenizer, WordPiece with "##"
 * continuations): control characters dropped, whitespace and CJK ideographs as separators,
 * accents stripped (NFD, nonspacing marks removed), lowercased, split at whitespace and at every
 * punctuation character, then each word cut greedily into the longest pieces the vocabulary
 * holds; a word no pieces make (or of more than 100 characters) is [UNK].
 */

export interface WordPiece {
  /** `[CLS] pieces… [SEP]` as token ids, the pieces cut so that the whole fits `maxTokens`. */
  encode(text: string, maxTokens: number): number[];
}

const maxWordChars = 100;

/** CJK ideographs: BERT puts spaces around each. */
function isCjk(cp: number): boolean {
  return (
    (cp >= 0x4e00 && cp <= 0x9fff) ||
    (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) ||
    (cp >= 0x2b820 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0x2f800 && cp <= 0x2fa1f)
  );
}

const whitespace = /^[\t\n\r \p{Zs}]$/u;
const control = /^\p{C}$/u;
// Unicode punctuation, and every ASCII symbol BERT counts as punctuation ($ + < = > ^ ` | ~ too).
const punctuation = /^[\p{P}!-/:-@[-`{-~]$/u;
const nonspacingMark = /\p{Mn}/gu;

/** The text as BertNormalizer leaves it: cleaned, CJK spaced, accents stripped, lowercased. */
function normalize(text: string): string {
  let out = '';
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (whitespace.test(ch)) out += ' ';
    else if (cp === 0 || cp === 0xfffd || control.test(ch)) continue;
    else if (isCjk(cp)) out += ` ${ch} `;
    else out += ch;
  }
  return out.normalize('NFD').replace(nonspacingMark, '').toLowerCase();
}

/** Words as BertPreTokenizer splits them: at whitespace, and each punctuation character alone. */
function words(text: string): string[] {
  const out: string[] = [];
  let word = '';
  for (const ch of text) {
    if (ch === ' ' || whitespace.test(ch)) {
      if (word) out.push(word);
      word = '';
    } else if (punctuation.test(ch)) {
      if (word) out.push(word);
      out.push(ch);
      word = '';
    } else word += ch;
  }
  if (word) out.push(word);
  return out;
}

/** A tokenizer over `vocab` (one token per entry, its id the index), which must hold the specials. */
export function createWordPiece(vocab: readonly string[]): WordPiece {
  const ids = new Map(vocab.map((t, i) => [t, i]));
  const id = (token: string): number => {
    const i = ids.get(token);
    if (i === undefined) throw new Error(`the vocabulary has no ${token}`);
    return i;
  };
  const [cls, sep, unk] = [id('[CLS]'), id('[SEP]'), id('[UNK]')];

  /** The longest-match-first pieces of one word, or [UNK] where some part matches nothing. */
  const cut = (word: string, into: string[]): void => {
    const chars = Array.from(word);
    if (chars.length > maxWordChars) {
      into.push('[UNK]');
      return;
    }
    const found: string[] = [];
    for (let start = 0; start < chars.length;) {
      let end = chars.length;
      let piece: string | undefined;
      for (; end > start; end--) {
        const candidate = (start > 0 ? '##' : '') + chars.slice(start, end).join('');
        if (ids.has(candidate)) {
          piece = candidate;
          break;
        }
      }
      if (piece === undefined) {
        into.push('[UNK]');
        return;
      }
      found.push(piece);
      start = end;
    }
    into.push(...found);
  };

  const pieces = (text: string): string[] => {
    const out: string[] = [];
    for (const word of words(normalize(text))) cut(word, out);
    return out;
  };

  return {
    encode(text, maxTokens) {
      const body = pieces(text)
        .slice(0, Math.max(0, maxTokens - 2))
        .map((p) => ids.get(p) ?? unk);
      return [cls, ...body, sep];
    },
  };
}
