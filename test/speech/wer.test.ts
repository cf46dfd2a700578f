import { describe, expect, it } from 'vitest';
import { alignWords, corpusWordErrorRate, normaliseForWer, wordErrorRate } from '../../core/speech/wer.js';

describe('normaliseForWer', () => {
  it('lower-cases and drops punctuation, keeping apostrophes inside words', () => {
    expect(normaliseForWer('Hello, World! Don’t stop: "now".')).toEqual(['hello', 'world', 'dont', 'stop', 'now']);
  });

  it('splits on hyphens, so spelled and written numbers agree', () => {
    expect(normaliseForWer('twenty-one')).toEqual(['twenty', 'one']);
    expect(normaliseForWer('21')).toEqual(['twenty', 'one']);
  });

  it('spells English numbers', () => {
    expect(normaliseForWer('I have 3 cats and 100 dogs')).toEqual([
      'i',
      'have',
      'three',
      'cats',
      'and',
      'one',
      'hundred',
      'dogs',
    ]);
    expect(normaliseForWer('2024')).toEqual(['two', 'thousand', 'twenty', 'four']);
    expect(normaliseForWer('at 7:30')).toEqual(['at', 'seven', 'thirty']);
    expect(normaliseForWer('the 3rd of May')).toEqual(['the', 'three', 'rd', 'of', 'may']);
    expect(normaliseForWer('007')).toEqual(['zero', 'zero', 'seven']);
  });

  it('spells German numbers as one word, and folds ß', () => {
    expect(normaliseForWer('Er ist 21 Jahre alt', 'de')).toEqual(['er', 'ist', 'einundzwanzig', 'jahre', 'alt']);
    expect(normaliseForWer('seit 3 Jahren, Straße', 'de')).toEqual(['seit', 'drei', 'jahren', 'strasse']);
    expect(normaliseForWer('30 101 1999', 'de')).toEqual([
      'dreissig',
      'einhunderteins',
      'eintausendneunhundertneunundneunzig',
    ]);
    expect(normaliseForWer('Dreißig', 'de')).toEqual(['dreissig']);
  });

  it('keeps umlauts and other letters', () => {
    expect(normaliseForWer('Schön, GRÜN und früh.', 'de')).toEqual(['schön', 'grün', 'und', 'früh']);
  });
});

describe('wordErrorRate', () => {
  it('is 0 for the same words however written', () => {
    expect(wordErrorRate('I will meet you at 7.', 'i will meet you at seven').wer).toBe(0);
    expect(wordErrorRate('Der Zug fährt um 8 Uhr ab.', 'der Zug fährt um acht Uhr ab', 'de').wer).toBe(0);
  });

  it('counts substitutions, deletions and insertions', () => {
    const r = wordErrorRate('the cat sat on the mat', 'the bat sat on mat');
    expect(r).toMatchObject({ substitutions: 1, deletions: 1, insertions: 0, referenceWords: 6, hypothesisWords: 5 });
    expect(r.wer).toBeCloseTo(2 / 6, 10);
    const more = wordErrorRate('please call me back', 'please do call me back now');
    expect(more).toMatchObject({ substitutions: 0, deletions: 0, insertions: 2 });
    expect(more.wer).toBeCloseTo(2 / 4, 10);
  });

  it('is 1 when nothing was heard, and can exceed 1 with many insertions', () => {
    expect(wordErrorRate('one two three', '').wer).toBe(1);
    expect(wordErrorRate('yes', 'no no no').wer).toBe(3);
  });

  it('handles empty references', () => {
    expect(wordErrorRate('', '').wer).toBe(0);
    expect(wordErrorRate('', 'noise').wer).toBe(1);
  });

  it('alignWords finds the minimal edit', () => {
    expect(alignWords(['a', 'b', 'c', 'd'], ['a', 'c', 'd'])).toMatchObject({
      substitutions: 0,
      deletions: 1,
      insertions: 0,
    });
    expect(alignWords(['a', 'b'], ['x', 'a', 'b'])).toMatchObject({ substitutions: 0, deletions: 0, insertions: 1 });
    expect(alignWords(['a', 'b', 'c'], ['c', 'b', 'a'])).toMatchObject({
      substitutions: 2,
      deletions: 0,
      insertions: 0,
    });
  });
});

describe('corpusWordErrorRate', () => {
  it('weights by reference words, not by sentence', () => {
    const r = corpusWordErrorRate([
      { reference: 'one', hypothesis: 'two' },
      { reference: 'a b c d e f g h i', hypothesis: 'a b c d e f g h i' },
    ]);
    expect(r.referenceWords).toBe(10);
    expect(r.wer).toBeCloseTo(0.1, 10);
  });
});
