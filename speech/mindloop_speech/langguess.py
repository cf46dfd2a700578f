"""Which of English and German a text is written in, when `speak` is given no language.

A small rule with no dependencies: German gets two points per ä, ö, ü or ß and one per common
German function word, English one per common English function word; the higher score wins and a
tie is English. Words both languages use (in, so, was, also, man) count for neither. It tells
only English from German; for any other language the caller names `lang`.
"""
from __future__ import annotations

import re

GERMAN_WORDS = frozenset(
    """
    der die das den dem des ein eine einen einem einer eines und ist sind bin bist war waren
    wird werden wurde nicht ich du er wir ihr sie es mich dich uns euch mein meine meinen dein
    deine sein seine unser mit zu von auf für über unter nach bei aus vor hinter zwischen durch
    gegen ohne um am im vom zum zur ins aber oder wenn dass weil denn doch noch schon auch nur
    sehr heute morgen gestern bitte danke ja nein nicht kein keine haben hat habe hatte kann
    können muss müssen soll sollen will wollen wie wo wer warum wann ob dann jetzt hier dort
    immer wieder mehr viel viele gut schön diese dieser dieses jeder alle sich
    """.split()
)

ENGLISH_WORDS = frozenset(
    """
    the a an and is are am was were be been being not i you he she we they it me him her us
    them my your his our their this that these those with to of on for about under after at
    from by into over before between through against without but or if because than then
    now here there always again more very today tomorrow yesterday please thanks yes no have
    has had do does did can could must should will would shall may might how where who why
    when what which just only also some any every all good nice
    """.split()
)

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def guess_language(text: str) -> str:
    """'de' or 'en'."""
    lowered = text.lower()
    german = 2 * sum(lowered.count(ch) for ch in "äöüß")
    english = 0
    for word in _WORD.findall(lowered):
        if word in GERMAN_WORDS:
            german += 1
        elif word in ENGLISH_WORDS:
            english += 1
    return "de" if german > english else "en"
